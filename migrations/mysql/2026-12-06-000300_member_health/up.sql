-- Each executor member's health as the cluster shares it, by URL (a server in two groups is
-- one member's health): set aside until `unhealthy_until` (NULL: healthy), its last transport
-- failure and what it said. Written on a change, read by every ax process each second, so
-- every process dispatches by the same health and every page shows it.
CREATE TABLE ax_member_health (
    url VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    unhealthy_until DATETIME(3) NULL,
    last_failure_at DATETIME(3) NULL,
    last_error VARCHAR(1024) NULL,
    changed_at DATETIME(3) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
-- Members that expired or left: listed as GONE, with when and why, for an hour.
CREATE TABLE ax_member_gone (
    group_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    url VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    gone_at DATETIME(3) NOT NULL,
    reason VARCHAR(255) NOT NULL,
    PRIMARY KEY (group_name, url)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
