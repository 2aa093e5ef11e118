ALTER TABLE ax_task DROP INDEX idx_ax_task_scene_status;
ALTER TABLE ax_instance DROP INDEX idx_ax_instance_status_scheduled;
