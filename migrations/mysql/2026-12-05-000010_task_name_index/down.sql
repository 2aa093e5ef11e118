ALTER TABLE ax_task DROP INDEX idx_ax_task_name;
