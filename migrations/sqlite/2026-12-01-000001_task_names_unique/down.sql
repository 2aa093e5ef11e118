DROP INDEX uq_ax_task_scene_name;
CREATE INDEX idx_ax_task_scene ON ax_task (scene);
