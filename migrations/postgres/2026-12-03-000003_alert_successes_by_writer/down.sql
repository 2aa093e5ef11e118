DROP TRIGGER ax_alert_run_ended ON ax_instance;
CREATE OR REPLACE FUNCTION ax_alert_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- MySQL: TIMESTAMPDIFF(MICROSECOND, trigger_at, dispatched_at) DIV 1000 (truncated).
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, (statement_timestamp() AT TIME ZONE 'utc')),
           (EXTRACT(EPOCH FROM (NEW.dispatched_at - NEW.trigger_at)) * 1000000)::BIGINT / 1000
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1 AND NEW.status <> OLD.status
      AND (NEW.status IN ('FAILED', 'MISSED', 'SKIPPED')
           OR (NEW.status = 'SUCCESS' AND (
               EXISTS (SELECT 1 FROM ax_alert_fold f
                       WHERE f.subject = 'task:' || NEW.task_id AND f.alerted = 1)
               OR EXISTS (SELECT 1 FROM ax_task t
                          WHERE t.id = NEW.task_id AND t.alert_lag_ms IS NOT NULL
                            AND (EXTRACT(EPOCH FROM (NEW.dispatched_at - NEW.trigger_at))
                                 * 1000000)::BIGINT > t.alert_lag_ms * 1000))));
    RETURN NULL;
END;
$$;
CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
EXECUTE FUNCTION ax_alert_run_ended();

DROP TRIGGER ax_alert_run_born_ended ON ax_instance;
CREATE OR REPLACE FUNCTION ax_alert_run_born_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
    SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
           COALESCE(NEW.finished_at, NEW.created_at)
    FROM ax_alert_state s
    WHERE s.id = 1 AND s.enabled = 1 AND NEW.status IN ('MISSED', 'SKIPPED');
    RETURN NULL;
END;
$$;
CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
EXECUTE FUNCTION ax_alert_run_born_ended();
