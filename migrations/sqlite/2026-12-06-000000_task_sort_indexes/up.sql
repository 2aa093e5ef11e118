-- The tasks page sorted by scene, status or next run, paged by (column, id) both ways: a
-- SQLite index ends with the rowid (the id), so each of these is read in exactly that order,
-- from one range past the page's cursor. (The sort by name reads idx_ax_task_name.)
CREATE INDEX idx_ax_task_scene_id ON ax_task (scene);
CREATE INDEX idx_ax_task_status_id ON ax_task (status);
CREATE INDEX idx_ax_task_next_run_at ON ax_task (next_run_at);
