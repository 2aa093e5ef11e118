-- A task's time zone (its cron fields match local time there; every stored time stays UTC),
-- what a run due while an earlier one is open does, and how far a run's dispatch is spread.
-- Existing tasks keep today's behaviour: UTC, ALLOW, no jitter.
ALTER TABLE ax_task
    ADD COLUMN time_zone VARCHAR(64) NOT NULL DEFAULT 'UTC',
    ADD COLUMN overlap VARCHAR(16) NOT NULL DEFAULT 'ALLOW',
    ADD COLUMN jitter_secs INTEGER NOT NULL DEFAULT 0;
-- The overlap policy asks for a task's open runs when one is due, whatever its history's size.
CREATE INDEX idx_ax_instance_task_status ON ax_instance (task_id, status);
