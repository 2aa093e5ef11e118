-- The console's tasks page sorted by name or by next fire, and the runs page's task named
-- without its scene: each read from its index in order, a page at a time.
CREATE INDEX idx_ax_task_name ON ax_task (name);
CREATE INDEX idx_ax_task_next_fire ON ax_task (next_run_at);
