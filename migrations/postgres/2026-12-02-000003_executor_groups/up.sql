-- Executor groups: a name tasks dispatch to, the routing that picks a member for each attempt,
-- and the cap of requests in flight to each member.
CREATE TABLE ax_executor_group (
    name VARCHAR(64) COLLATE "C" NOT NULL PRIMARY KEY,
    routing VARCHAR(32) NOT NULL,
    max_in_flight INTEGER NOT NULL,
    updated_at TIMESTAMP(3) NOT NULL
);
-- A group's members, in registration order (`position`). A member given by the group's
-- definition has no `last_seen_at` and stays; one that registered itself is dropped once not
-- heard from for the member time-to-live. In the store, so every ax process of a cluster
-- routes over the same members.
CREATE TABLE ax_executor_member (
    group_name VARCHAR(64) COLLATE "C" NOT NULL,
    url VARCHAR(512) COLLATE "C" NOT NULL,
    position BIGINT NOT NULL,
    capacity INTEGER NULL,
    registered_at TIMESTAMP(3) NOT NULL,
    last_seen_at TIMESTAMP(3) NULL,
    PRIMARY KEY (group_name, url)
);
-- A task dispatched to a group: `{"group", "path", "routing"?}` as JSON, or NULL for one
-- given a handler URL.
ALTER TABLE ax_task ADD COLUMN executor TEXT NULL;
-- The member that served a run's (last) attempt, and a broadcast run's shard of its fire.
ALTER TABLE ax_instance
    ADD COLUMN member VARCHAR(512) NULL,
    ADD COLUMN shard_index INTEGER NULL,
    ADD COLUMN shard_total INTEGER NULL;
ALTER TABLE ax_attempt ADD COLUMN member VARCHAR(512) NULL;
