ALTER TABLE ax_scene DROP COLUMN paused_by;
DROP INDEX idx_ax_task_paused;
ALTER TABLE ax_task
    DROP COLUMN paused_by,
    DROP COLUMN paused_at;
