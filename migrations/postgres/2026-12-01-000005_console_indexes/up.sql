-- The console at size (100,000 tasks, 5,000,000 runs). Runs by status, newest first (the runs
-- page filtered by status, the dashboard's latest failures), and the dashboard's counts by
-- status over the last hour and day, read from this index alone, one range a status.
CREATE INDEX idx_ax_instance_status_scheduled ON ax_instance (status, scheduled_at);
-- The scenes page's counts by scene and status, in order, from this index alone.
CREATE INDEX idx_ax_task_scene_status ON ax_task (scene, status);
