-- What executors say while a run is open: log lines per attempt, and per attempt its progress,
-- how many lines and bytes are kept, how many went (oldest first), and the output of its
-- reply or callback. Written by the log endpoint and the results that carry an output only.
CREATE TABLE ax_run_log (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    request_id CHAR(36) NOT NULL,
    attempt INTEGER NOT NULL,
    at TIMESTAMP NOT NULL,
    text TEXT NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE INDEX idx_ax_run_log_attempt ON ax_run_log (request_id, attempt, id);

CREATE TABLE ax_run_log_attempt (
    request_id CHAR(36) NOT NULL,
    attempt INTEGER NOT NULL,
    progress INTEGER NULL,
    line_count INTEGER NOT NULL,
    byte_count BIGINT NOT NULL,
    dropped BIGINT NOT NULL,
    output TEXT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (request_id, attempt)
);
