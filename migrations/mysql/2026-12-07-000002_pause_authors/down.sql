ALTER TABLE ax_scene DROP COLUMN paused_by;
ALTER TABLE ax_task
    DROP INDEX idx_ax_task_paused,
    DROP COLUMN paused_by,
    DROP COLUMN paused_at;
