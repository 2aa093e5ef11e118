-- Each executor member's health as the cluster shares it, by URL (a server in two groups is
-- one member's health): set aside until `unhealthy_until` (NULL: healthy), its last transport
-- failure and what it said. Written on a change, read by every ax process each second, so
-- every process dispatches by the same health and every page shows it.
CREATE TABLE ax_member_health (
    url VARCHAR(512) COLLATE "C" NOT NULL PRIMARY KEY,
    unhealthy_until TIMESTAMP(3) NULL,
    last_failure_at TIMESTAMP(3) NULL,
    last_error VARCHAR(1024) NULL,
    changed_at TIMESTAMP(3) NOT NULL
);
-- Members that expired or left: listed as GONE, with when and why, for an hour.
CREATE TABLE ax_member_gone (
    group_name VARCHAR(64) COLLATE "C" NOT NULL,
    url VARCHAR(512) COLLATE "C" NOT NULL,
    gone_at TIMESTAMP(3) NOT NULL,
    reason VARCHAR(255) NOT NULL,
    PRIMARY KEY (group_name, url)
);
