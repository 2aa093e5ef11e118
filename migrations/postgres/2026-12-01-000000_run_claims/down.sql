UPDATE ax_instance SET next_attempt_at = claimed_until WHERE claimed_until IS NOT NULL;
DROP INDEX idx_ax_instance_claimed;
DROP INDEX idx_ax_instance_next_attempt;
CREATE INDEX idx_ax_instance_next_attempt ON ax_instance (status, next_attempt_at);
ALTER TABLE ax_instance
    DROP COLUMN claimed_until,
    DROP COLUMN dispatched_attempt;
