-- Each ax process's promise about what it may have sent: nothing fired for a second after
-- `sent_through` (a unix second), written before each second's runs go out. Another process
-- that finds `renewed_at` stale fences it (`epoch` + 1, in the same transaction as it takes
-- the runs fired for later seconds); the fenced process's next write fails, and it re-checks
-- each claim it holds before sending anything (see `crate::fencing`).
CREATE TABLE ax_process (
    instance_id VARCHAR(64) COLLATE "C" NOT NULL PRIMARY KEY,
    epoch BIGINT NOT NULL,
    sent_through BIGINT NOT NULL,
    renewed_at TIMESTAMP(3) NOT NULL,
    fenced_at TIMESTAMP(3) NULL
);
