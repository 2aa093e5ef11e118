ALTER TABLE ax_executor_member DROP COLUMN registered_by;
