ALTER TABLE ax_task
    ADD COLUMN retry_backoff_secs INT NULL,
    ADD COLUMN retry_factor INT NULL,
    ADD COLUMN misfire_threshold_secs INT NULL;

ALTER TABLE ax_instance
    ADD COLUMN next_attempt_at DATETIME(3) NULL,
    ADD INDEX idx_ax_instance_next_attempt (status, next_attempt_at);
