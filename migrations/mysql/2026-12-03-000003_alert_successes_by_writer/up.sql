-- The run-end triggers record only what no run's writer can miss cheaply: a run ending
-- FAILED, MISSED or SKIPPED, tested on the new row alone before any table is read. The
-- successes the folder needs (a task's alert resolved, a late first dispatch) are queued by
-- the writer of runs in one statement per batch: a look-up per successful run inside the
-- trigger cost MariaDB more than the run's own write.
DROP TRIGGER ax_alert_run_ended;
CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
IF NEW.status <> OLD.status AND NEW.status IN ('FAILED', 'MISSED', 'SKIPPED') THEN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, UTC_TIMESTAMP(3)),
           TIMESTAMPDIFF(MICROSECOND, NEW.trigger_at, NEW.dispatched_at) DIV 1000
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1;
END IF;

DROP TRIGGER ax_alert_run_born_ended;
CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
IF NEW.status IN ('MISSED', 'SKIPPED') THEN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, NEW.created_at)
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1;
END IF;
