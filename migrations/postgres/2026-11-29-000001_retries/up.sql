ALTER TABLE ax_task
    ADD COLUMN retry_backoff_secs INTEGER NULL,
    ADD COLUMN retry_factor INTEGER NULL,
    ADD COLUMN misfire_threshold_secs INTEGER NULL;

ALTER TABLE ax_instance ADD COLUMN next_attempt_at TIMESTAMP(3) NULL;
CREATE INDEX idx_ax_instance_next_attempt ON ax_instance (status, next_attempt_at);
