UPDATE ax_instance SET next_attempt_at = claimed_until WHERE claimed_until IS NOT NULL;
ALTER TABLE ax_instance
    DROP INDEX idx_ax_instance_claimed,
    DROP COLUMN claimed_until,
    DROP COLUMN dispatched_attempt;
