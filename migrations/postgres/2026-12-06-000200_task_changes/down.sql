DROP TRIGGER ax_task_deleted ON ax_task;
DROP FUNCTION ax_task_deleted();
DROP TRIGGER ax_task_changed ON ax_task;
DROP FUNCTION ax_task_changed();
DROP TRIGGER ax_task_created ON ax_task;
DROP FUNCTION ax_task_created();
DROP TABLE ax_task_change;
