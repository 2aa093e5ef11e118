-- The console's tasks page sorted by name or by next fire, and the runs page's task named
-- without its scene: each read from its index in order, a page at a time.
ALTER TABLE ax_task ADD INDEX idx_ax_task_name (name);
ALTER TABLE ax_task ADD INDEX idx_ax_task_next_fire (next_run_at);
