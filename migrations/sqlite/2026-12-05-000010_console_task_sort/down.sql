DROP INDEX idx_ax_task_next_fire;
DROP INDEX idx_ax_task_name;
