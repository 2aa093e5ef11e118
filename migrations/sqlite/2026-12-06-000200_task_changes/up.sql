-- The task change feed: every process reads it each second to apply every create, change,
-- delete, pause and resume to its wheel, whichever process made it. The triggers write it in
-- the statement that changes the task, so no write path can miss one: a new or deleted task,
-- a raised version (a change of its definition, a pause, a resume), or a next run taken away
-- or given back (a scene's pause and resume). A fire's advance writes nothing here.
-- AUTOINCREMENT: an id is never used twice, even once the newest rows were pruned.
CREATE TABLE ax_task_change (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    task_id BIGINT NOT NULL,
    at TIMESTAMP NOT NULL
);
CREATE INDEX idx_ax_task_change_at ON ax_task_change (at);

CREATE TRIGGER ax_task_created AFTER INSERT ON ax_task FOR EACH ROW
BEGIN
INSERT INTO ax_task_change (task_id, at) VALUES (NEW.id, strftime('%Y-%m-%d %H:%M:%f', 'now'));
END;

CREATE TRIGGER ax_task_changed AFTER UPDATE ON ax_task FOR EACH ROW
WHEN NEW.version <> OLD.version OR (NEW.next_run_at IS NULL) <> (OLD.next_run_at IS NULL)
BEGIN
INSERT INTO ax_task_change (task_id, at) VALUES (NEW.id, strftime('%Y-%m-%d %H:%M:%f', 'now'));
END;

CREATE TRIGGER ax_task_deleted AFTER DELETE ON ax_task FOR EACH ROW
BEGIN
INSERT INTO ax_task_change (task_id, at) VALUES (OLD.id, strftime('%Y-%m-%d %H:%M:%f', 'now'));
END;
