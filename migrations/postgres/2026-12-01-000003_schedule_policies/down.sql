DROP INDEX idx_ax_instance_task_status;
ALTER TABLE ax_task DROP COLUMN time_zone, DROP COLUMN overlap, DROP COLUMN jitter_secs;
