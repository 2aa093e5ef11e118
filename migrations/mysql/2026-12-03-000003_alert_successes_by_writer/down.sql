DROP TRIGGER ax_alert_run_ended;
CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, UTC_TIMESTAMP(3)),
       TIMESTAMPDIFF(MICROSECOND, NEW.trigger_at, NEW.dispatched_at) DIV 1000
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1 AND NEW.status <> OLD.status
  AND (NEW.status IN ('FAILED', 'MISSED', 'SKIPPED')
       OR (NEW.status = 'SUCCESS' AND (
           EXISTS (SELECT 1 FROM ax_alert_fold f
                   WHERE f.subject = CONCAT('task:', NEW.task_id) AND f.alerted = 1)
           OR EXISTS (SELECT 1 FROM ax_task t
                      WHERE t.id = NEW.task_id AND t.alert_lag_ms IS NOT NULL
                        AND TIMESTAMPDIFF(MICROSECOND, NEW.trigger_at, NEW.dispatched_at)
                            > t.alert_lag_ms * 1000))));

DROP TRIGGER ax_alert_run_born_ended;
CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, NEW.created_at)
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1 AND NEW.status IN ('MISSED', 'SKIPPED');
