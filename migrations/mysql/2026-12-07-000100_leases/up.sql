-- Leases: what MariaDB Galera Cluster does not replicate, GET_LOCK, replaced by rows every node
-- sees. A lease is its holder's until `expires_at` (the server's UTC clock); the holder renews
-- it, and anyone may take it once it has expired. Used only on Galera (see
-- ax_store::queries::leases). IF NOT EXISTS: a migration on Galera makes the table before the
-- migrations run, to lease them.
CREATE TABLE IF NOT EXISTS ax_lease (
    name VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    holder VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
