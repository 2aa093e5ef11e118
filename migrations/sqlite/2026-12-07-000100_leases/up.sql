-- The leases of a MariaDB Galera store (see the MySQL migration of this name), mirrored so both
-- backends have one schema; a SQLite store's process holds its file's lock instead and leaves
-- this table empty.
CREATE TABLE IF NOT EXISTS ax_lease (
    name TEXT NOT NULL PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
