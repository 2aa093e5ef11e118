-- A task's (scene, name) is unique: tasks as code are matched by it. Names compare exactly, as
-- on SQLite (binary collation: `Report` and `report` are two tasks). ax renames existing
-- clashes before this runs (`name (2)`, …, logged). The scene index is the new one's prefix.
ALTER TABLE ax_task
    MODIFY scene VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    DROP INDEX idx_ax_task_scene,
    ADD UNIQUE INDEX uq_ax_task_scene_name (scene, name);
