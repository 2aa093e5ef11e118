DROP INDEX idx_ax_task_alert_lag;
DROP INDEX idx_ax_alert_fold_alerted;
DROP INDEX idx_ax_instance_task_status;
CREATE INDEX idx_ax_instance_task_status ON ax_instance (task_id, status);
ALTER TABLE ax_alert_state DROP COLUMN watch_version;
