CREATE OR REPLACE FUNCTION ax_alert_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, (statement_timestamp() AT TIME ZONE 'utc'))
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1 AND NEW.status <> OLD.status
      AND (NEW.status IN ('FAILED', 'MISSED', 'SKIPPED')
           OR (NEW.status = 'SUCCESS' AND EXISTS (
               SELECT 1 FROM ax_alert_fold f
               WHERE f.subject = 'task:' || NEW.task_id AND f.alerted = 1)));
    RETURN NULL;
END;
$$;
ALTER TABLE ax_alert_event DROP COLUMN lag_ms, DROP COLUMN event, DROP COLUMN subject;
ALTER TABLE ax_task DROP COLUMN alert_lag_ms;
