-- A run's attempts that ended without ending the run (they failed and a retry followed): the
-- run's row keeps only its last outcome, and a run's timeline shows each attempt. Written in
-- the commit that schedules the retry; nothing on the path of a first-attempt success.
CREATE TABLE ax_attempt (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    request_id CHAR(36) NOT NULL,
    attempt INT NOT NULL,
    ended_at DATETIME(3) NOT NULL,
    code VARCHAR(64) NULL,
    message TEXT NULL,
    process VARCHAR(64) NOT NULL,
    KEY ax_attempt_run (request_id, attempt)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
