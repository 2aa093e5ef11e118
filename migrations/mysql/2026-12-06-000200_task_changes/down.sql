DROP TRIGGER ax_task_deleted;
DROP TRIGGER ax_task_changed;
DROP TRIGGER ax_task_created;
DROP TABLE ax_task_change;
