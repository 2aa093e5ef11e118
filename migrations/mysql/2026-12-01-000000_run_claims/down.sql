UPDATE ax_instance SET next_attempt_at = claimed_until WHERE claimed_until IS NOT NULL;
ALTER TABLE ax_instance
    DROP INDEX idx_ax_instance_claimed,
    DROP INDEX idx_ax_instance_next_attempt,
    ADD INDEX idx_ax_instance_next_attempt (status, next_attempt_at),
    DROP COLUMN claimed_until,
    DROP COLUMN dispatched_attempt;
