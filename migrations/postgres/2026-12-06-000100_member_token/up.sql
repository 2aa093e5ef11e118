-- The token a member registered itself with, by its configured name (`server.tokens`, `admin`,
-- or `anonymous` without tokens; never the token itself): an executor's token renews and
-- removes only its own members. NULL for a member an admin defined (`PUT`, `ax apply`), which
-- only an admin removes, and for one registered before this column: the first token to renew
-- it takes it.
ALTER TABLE ax_executor_member
    ADD COLUMN registered_by VARCHAR(64) COLLATE "C" NULL;
