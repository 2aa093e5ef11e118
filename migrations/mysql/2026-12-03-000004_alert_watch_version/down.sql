DROP INDEX idx_ax_task_alert_lag ON ax_task;
DROP INDEX idx_ax_alert_fold_alerted ON ax_alert_fold;
ALTER TABLE ax_instance DROP INDEX idx_ax_instance_task_status,
    ADD INDEX idx_ax_instance_task_status (task_id, status);
ALTER TABLE ax_alert_state DROP COLUMN watch_version;
