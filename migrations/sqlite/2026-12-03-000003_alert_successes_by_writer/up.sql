-- The run-end triggers record only a run ending FAILED, MISSED or SKIPPED (their WHEN reads
-- the new row alone); the successes the folder needs are queued by the writer of runs (see
-- the MariaDB migration of the same name).
DROP TRIGGER ax_alert_run_ended;
CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
WHEN NEW.status <> OLD.status AND NEW.status IN ('FAILED', 'MISSED', 'SKIPPED')
BEGIN
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, strftime('%Y-%m-%d %H:%M:%f', 'now')),
       CAST((julianday(NEW.dispatched_at) - julianday(NEW.trigger_at)) * 86400000 AS INTEGER)
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1;
END;

DROP TRIGGER ax_alert_run_born_ended;
CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
WHEN NEW.status IN ('MISSED', 'SKIPPED')
BEGIN
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, NEW.created_at)
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1;
END;
