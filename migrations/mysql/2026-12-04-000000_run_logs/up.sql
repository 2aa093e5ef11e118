-- What executors say while a run is open: log lines per attempt, and per attempt its progress,
-- how many lines and bytes are kept, how many went (oldest first), and the output of its
-- reply or callback. Written by the log endpoint and the results that carry an output only.
CREATE TABLE ax_run_log (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    request_id CHAR(36) NOT NULL,
    attempt INT NOT NULL,
    at DATETIME(3) NOT NULL,
    text TEXT NOT NULL,
    bytes INT NOT NULL,
    KEY idx_ax_run_log_attempt (request_id, attempt, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE ax_run_log_attempt (
    request_id CHAR(36) NOT NULL,
    attempt INT NOT NULL,
    progress INT NULL,
    line_count INT NOT NULL,
    byte_count BIGINT NOT NULL,
    dropped BIGINT NOT NULL,
    output MEDIUMTEXT NULL,
    updated_at DATETIME(3) NOT NULL,
    PRIMARY KEY (request_id, attempt)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
