-- The run-end triggers record only what no run's writer can miss cheaply: a run ending
-- FAILED, MISSED or SKIPPED, tested on the new row alone before any table is read (the
-- trigger's WHEN, as on SQLite; MySQL tests it with an IF in the trigger's body). The
-- successes the folder needs (a task's alert resolved, a late first dispatch) are queued by
-- the writer of runs in one statement per batch: a look-up per successful run inside the
-- trigger cost MariaDB more than the run's own write.
DROP TRIGGER ax_alert_run_ended ON ax_instance;
CREATE OR REPLACE FUNCTION ax_alert_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, (statement_timestamp() AT TIME ZONE 'utc')),
           (EXTRACT(EPOCH FROM (NEW.dispatched_at - NEW.trigger_at)) * 1000000)::BIGINT / 1000
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
WHEN (NEW.status <> OLD.status AND NEW.status IN ('FAILED', 'MISSED', 'SKIPPED'))
EXECUTE FUNCTION ax_alert_run_ended();

DROP TRIGGER ax_alert_run_born_ended ON ax_instance;
CREATE OR REPLACE FUNCTION ax_alert_run_born_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, NEW.created_at)
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
WHEN (NEW.status IN ('MISSED', 'SKIPPED'))
EXECUTE FUNCTION ax_alert_run_born_ended();
