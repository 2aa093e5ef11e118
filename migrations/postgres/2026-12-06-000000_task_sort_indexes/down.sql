DROP INDEX idx_ax_task_next_run_at;
DROP INDEX idx_ax_task_status_id;
DROP INDEX idx_ax_task_scene_id;
