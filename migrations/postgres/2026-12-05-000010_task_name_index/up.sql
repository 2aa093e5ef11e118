-- The runs page's task named without its scene: the tasks of a name, or of names starting
-- with it, read in one range of this index (name is COLLATE "C", so a LIKE 'prefix%' can use it).
CREATE INDEX idx_ax_task_name ON ax_task (name);
