-- The task change feed: every process reads it each second to apply every create, change,
-- delete, pause and resume to its wheel, whichever process made it. The triggers write it in
-- the statement that changes the task, so no write path can miss one: a new or deleted task,
-- a raised version (a change of its definition, a pause, a resume), or a next run taken away
-- or given back (a scene's pause and resume). A fire's advance writes nothing here.
CREATE TABLE ax_task_change (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id BIGINT NOT NULL,
    at DATETIME(3) NOT NULL,
    KEY idx_ax_task_change_at (at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TRIGGER ax_task_created AFTER INSERT ON ax_task FOR EACH ROW
INSERT INTO ax_task_change (task_id, at) VALUES (NEW.id, UTC_TIMESTAMP(3));

CREATE TRIGGER ax_task_changed AFTER UPDATE ON ax_task FOR EACH ROW
INSERT INTO ax_task_change (task_id, at)
SELECT NEW.id, UTC_TIMESTAMP(3) FROM DUAL
WHERE NEW.version <> OLD.version OR (NEW.next_run_at IS NULL) <> (OLD.next_run_at IS NULL);

CREATE TRIGGER ax_task_deleted AFTER DELETE ON ax_task FOR EACH ROW
INSERT INTO ax_task_change (task_id, at) VALUES (OLD.id, UTC_TIMESTAMP(3));
