-- A task's (scene, name) is unique: tasks as code are matched by it. ax renames existing
-- clashes before this runs (`name (2)`, …, logged). The scene index is the new one's prefix.
DROP INDEX idx_ax_task_scene;
CREATE UNIQUE INDEX uq_ax_task_scene_name ON ax_task (scene, name);
