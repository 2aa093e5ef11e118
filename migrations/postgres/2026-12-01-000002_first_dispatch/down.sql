ALTER TABLE ax_instance DROP COLUMN dispatched_at;
