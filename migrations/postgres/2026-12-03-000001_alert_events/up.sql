-- Alert events beside run ends: a run dispatched late (LAG, by its task's alert_lag_ms),
-- and events about no run (an executor member gone, an ax process gone, Redis unreachable),
-- queued with their `subject` and `event` (task_id 0, request_id '').
ALTER TABLE ax_task ADD COLUMN alert_lag_ms BIGINT NULL;
ALTER TABLE ax_alert_event
    ADD COLUMN subject VARCHAR(600) NULL,
    ADD COLUMN event VARCHAR(32) NULL,
    ADD COLUMN lag_ms BIGINT NULL;

-- A success is recorded when it resolves an alert, or when its first dispatch came later
-- than its task's alert_lag_ms after it was due (a primary-key look-up, only while alerts
-- are on). The trigger ax_alert_run_ended stays; its function is replaced.
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
