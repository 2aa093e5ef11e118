-- The tasks page sorted by scene, status or next run, paged by (column, id) both ways: an
-- InnoDB secondary index ends with the primary key, so each of these is read in exactly that
-- order, from one range past the page's cursor. (The sort by name reads idx_ax_task_name.)
ALTER TABLE ax_task
    ADD INDEX idx_ax_task_scene_id (scene),
    ADD INDEX idx_ax_task_status_id (status),
    ADD INDEX idx_ax_task_next_run_at (next_run_at);
