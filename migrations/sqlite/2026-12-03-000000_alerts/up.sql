-- Alerts. A run's end that may alert is recorded by the database itself, in the statement
-- that ends the run (the triggers below), so no write path can miss one and a crash loses
-- none: `ax_alert_event` is the queue of such ends. The folder (one at a time, over every ax
-- process) turns them into alerts by the rules and the fold state, and the senders deliver
-- the alerts of the outbox, `ax_alert`, claiming each row as runs are claimed.
CREATE TABLE ax_alert_state (
    id INT NOT NULL PRIMARY KEY,
    -- 1 while alert channels are configured; the triggers record nothing otherwise.
    enabled INT NOT NULL,
    -- Who folded last (SQLite has one writer at a time: the UPDATE that starts a fold is its lock).
    folded_by VARCHAR(64) NULL,
    folded_at TIMESTAMP NULL
);
INSERT INTO ax_alert_state (id, enabled) VALUES (1, 0);

CREATE TABLE ax_alert_event (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    request_id VARCHAR(36) NOT NULL,
    task_id BIGINT NOT NULL,
    status VARCHAR(16) NOT NULL,
    code VARCHAR(128) NULL,
    message TEXT NULL,
    at TIMESTAMP NOT NULL
);

-- Per (subject, event): the window, the silence and what was folded into it.
CREATE TABLE ax_alert_fold (
    subject VARCHAR(600) NOT NULL,
    event VARCHAR(32) NOT NULL,
    window_start TIMESTAMP NULL,
    window_count INT NOT NULL DEFAULT 0,
    silent_until TIMESTAMP NULL,
    folded INT NOT NULL DEFAULT 0,
    folded_since TIMESTAMP NULL,
    alerted INT NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, event)
);

-- The outbox: one row per alert and channel (an event folded into a silence: one row, no
-- channel, status FOLDED). `id` is the alert's stable id, the same on every channel and resend.
CREATE TABLE ax_alert (
    id VARCHAR(36) NOT NULL,
    channel VARCHAR(64) NOT NULL,
    event VARCHAR(32) NOT NULL,
    subject VARCHAR(600) NOT NULL,
    task_id BIGINT NULL,
    scene VARCHAR(64) NULL,
    request_id VARCHAR(36) NULL,
    code VARCHAR(128) NULL,
    message TEXT NULL,
    count INT NOT NULL,
    folded INT NOT NULL,
    folded_since TIMESTAMP NULL,
    at TIMESTAMP NOT NULL,
    status VARCHAR(16) NOT NULL,
    tries INT NOT NULL DEFAULT 0,
    next_try_at TIMESTAMP NULL,
    claimant VARCHAR(64) NULL,
    claimed_until TIMESTAMP NULL,
    sent_at TIMESTAMP NULL,
    last_error TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (id, channel)
);
CREATE INDEX ax_alert_due ON ax_alert (status, next_try_at);
CREATE INDEX ax_alert_recent ON ax_alert (created_at);
CREATE INDEX ax_alert_task ON ax_alert (task_id, created_at);

-- The rules of a task and of a scene (JSON, the shape of `alerts.default`); NULL: the next
-- one out applies.
ALTER TABLE ax_task ADD COLUMN alerts TEXT NULL;
ALTER TABLE ax_scene ADD COLUMN alerts TEXT NULL;

CREATE TRIGGER ax_alert_run_ended AFTER UPDATE ON ax_instance FOR EACH ROW
BEGIN
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, strftime('%Y-%m-%d %H:%M:%f', 'now'))
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1 AND NEW.status <> OLD.status
  AND (NEW.status IN ('FAILED', 'MISSED', 'SKIPPED')
       OR (NEW.status = 'SUCCESS' AND EXISTS (
           SELECT 1 FROM ax_alert_fold f
           WHERE f.subject = 'task:' || NEW.task_id AND f.alerted = 1)));
END;

CREATE TRIGGER ax_alert_run_born_ended AFTER INSERT ON ax_instance FOR EACH ROW
BEGIN
INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at)
SELECT NEW.request_id, NEW.task_id, NEW.status, NEW.callback_code, NEW.callback_message,
       COALESCE(NEW.finished_at, NEW.created_at)
FROM ax_alert_state s
WHERE s.id = 1 AND s.enabled = 1 AND NEW.status IN ('MISSED', 'SKIPPED');
END;
