DROP TABLE ax_meta;
DROP INDEX idx_ax_instance_finished;
DROP INDEX idx_ax_instance_scheduled;
ALTER TABLE ax_instance DROP COLUMN params;
DROP TABLE ax_task_dependency;
ALTER TABLE ax_task DROP COLUMN dependency_timeout_secs;
UPDATE ax_task SET status = 'DISABLED' WHERE status = 'PAUSED';
