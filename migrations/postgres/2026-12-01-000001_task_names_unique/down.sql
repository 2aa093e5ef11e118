DROP INDEX uq_ax_task_scene_name;
CREATE INDEX idx_ax_task_scene ON ax_task (scene);
ALTER TABLE ax_task
    ALTER COLUMN scene TYPE VARCHAR(64) COLLATE "default",
    ALTER COLUMN name TYPE VARCHAR(128) COLLATE "default";
