-- When a run's first attempt was sent to its handler: a task's trigger lag is this minus the
-- scheduled time (runs are recorded ahead of their second, so the row's times do not tell).
-- Older runs have none.
ALTER TABLE ax_instance ADD COLUMN dispatched_at TIMESTAMP(3) NULL;
