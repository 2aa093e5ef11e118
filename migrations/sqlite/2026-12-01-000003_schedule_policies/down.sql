DROP INDEX idx_ax_instance_task_status;
ALTER TABLE ax_task DROP COLUMN jitter_secs;
ALTER TABLE ax_task DROP COLUMN overlap;
ALTER TABLE ax_task DROP COLUMN time_zone;
