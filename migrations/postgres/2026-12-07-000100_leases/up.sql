-- Leases: what MariaDB Galera Cluster does not replicate, GET_LOCK, replaced by rows every node
-- sees (see the MySQL migration of this name), mirrored so every backend has one schema. A
-- lease is its holder's until `expires_at` (UTC). IF NOT EXISTS, as on MySQL.
CREATE TABLE IF NOT EXISTS ax_lease (
    name VARCHAR(100) COLLATE "C" NOT NULL PRIMARY KEY,
    holder VARCHAR(100) COLLATE "C" NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL
);
