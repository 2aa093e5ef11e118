DROP INDEX idx_ax_task_name;
