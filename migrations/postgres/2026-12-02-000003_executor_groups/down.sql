ALTER TABLE ax_attempt DROP COLUMN member;
ALTER TABLE ax_instance DROP COLUMN member, DROP COLUMN shard_index, DROP COLUMN shard_total;
ALTER TABLE ax_task DROP COLUMN executor;
DROP TABLE ax_executor_member;
DROP TABLE ax_executor_group;
