-- The tasks page sorted by scene, status or next run, paged by (column, id) both ways. InnoDB
-- appends the primary key to each secondary index; PostgreSQL does not, so id is named as the
-- last column here to keep the (column, id) order readable from one range.
-- (The sort by name reads idx_ax_task_name.)
CREATE INDEX idx_ax_task_scene_id ON ax_task (scene, id);
CREATE INDEX idx_ax_task_status_id ON ax_task (status, id);
CREATE INDEX idx_ax_task_next_run_at ON ax_task (next_run_at, id);
