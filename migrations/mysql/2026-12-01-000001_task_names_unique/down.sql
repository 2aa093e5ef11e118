ALTER TABLE ax_task
    DROP INDEX uq_ax_task_scene_name,
    ADD INDEX idx_ax_task_scene (scene),
    MODIFY scene VARCHAR(64) NOT NULL,
    MODIFY name VARCHAR(128) NOT NULL;
