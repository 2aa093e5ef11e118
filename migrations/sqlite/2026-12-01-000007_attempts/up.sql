-- A run's attempts that ended without ending the run (they failed and a retry followed): the
-- run's row keeps only its last outcome, and a run's timeline shows each attempt. Written in
-- the commit that schedules the retry; nothing on the path of a first-attempt success.
CREATE TABLE ax_attempt (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    request_id CHAR(36) NOT NULL,
    attempt INTEGER NOT NULL,
    ended_at TIMESTAMP NOT NULL,
    code VARCHAR(64) NULL,
    message TEXT NULL,
    process VARCHAR(64) NOT NULL
);
CREATE INDEX ax_attempt_run ON ax_attempt (request_id, attempt);
