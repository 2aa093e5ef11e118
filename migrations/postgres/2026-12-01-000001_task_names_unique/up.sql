-- A task's (scene, name) is unique: tasks as code are matched by it. Names compare exactly, as
-- on SQLite (MySQL's utf8mb4_bin is COLLATE "C" here: byte order, `Report` and `report` are two
-- tasks). ax renames existing clashes before this runs (`name (2)`, …, logged). The scene index
-- is the new one's prefix.
ALTER TABLE ax_task
    ALTER COLUMN scene TYPE VARCHAR(64) COLLATE "C",
    ALTER COLUMN name TYPE VARCHAR(128) COLLATE "C";
DROP INDEX idx_ax_task_scene;
CREATE UNIQUE INDEX uq_ax_task_scene_name ON ax_task (scene, name);
