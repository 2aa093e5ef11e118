DROP INDEX idx_ax_instance_next_attempt;
ALTER TABLE ax_instance DROP COLUMN next_attempt_at;
ALTER TABLE ax_task
    DROP COLUMN retry_backoff_secs,
    DROP COLUMN retry_factor,
    DROP COLUMN misfire_threshold_secs;
