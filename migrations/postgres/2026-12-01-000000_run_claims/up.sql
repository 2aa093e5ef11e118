-- A dispatcher's claim gets columns of its own: `next_attempt_at` says only when a waiting run
-- is due, `claimed_until` when a dispatched attempt's claim lapses, `dispatched_attempt` which
-- attempt was handed out last (results for later ones are refused). The lifecycle keeps both
-- times NULL outside the state they belong to, so they are indexed alone: a run that changes
-- status then leaves those indexes untouched.
ALTER TABLE ax_instance
    ADD COLUMN dispatched_attempt INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN claimed_until TIMESTAMP(3) NULL;
CREATE INDEX idx_ax_instance_claimed ON ax_instance (claimed_until);
DROP INDEX idx_ax_instance_next_attempt;
CREATE INDEX idx_ax_instance_next_attempt ON ax_instance (next_attempt_at);

-- Runs past their first dispatch, and first attempts fired (claimed at birth), count as
-- dispatched; a READY retry waits for its time.
UPDATE ax_instance SET dispatched_attempt = attempt WHERE status IN ('RUNNING', 'SUCCESS', 'FAILED');
UPDATE ax_instance SET dispatched_attempt = 1, claimed_until = next_attempt_at, next_attempt_at = NULL
    WHERE status = 'READY' AND attempt = 1;
UPDATE ax_instance SET dispatched_attempt = attempt - 1 WHERE status = 'READY' AND attempt > 1;
