-- Bumped (on row 1) whenever the tasks whose successes the folder needs change: a task
-- alerted or resolved, a task's alertLagMs set. Writers of runs keep that set in memory and
-- read it again only when this moves.
ALTER TABLE ax_alert_state ADD COLUMN watch_version BIGINT NOT NULL DEFAULT 0;
-- A folder that alerts a task looks, in its transaction, for the task's successes since the
-- alert (one its writer did not queue): by task, status and finish time.
DROP INDEX idx_ax_instance_task_status;
CREATE INDEX idx_ax_instance_task_status ON ax_instance (task_id, status, finished_at);
-- What a writer reads again when the version moves, found without a scan.
CREATE INDEX idx_ax_alert_fold_alerted ON ax_alert_fold (alerted);
CREATE INDEX idx_ax_task_alert_lag ON ax_task (alert_lag_ms);
