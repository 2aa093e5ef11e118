-- Each executor member's health as the cluster shares it, by URL (a server in two groups is
-- one member's health): set aside until `unhealthy_until` (NULL: healthy), its last transport
-- failure and what it said. Written on a change, read by every ax process each second.
CREATE TABLE ax_member_health (
    url VARCHAR(512) NOT NULL PRIMARY KEY,
    unhealthy_until TIMESTAMP NULL,
    last_failure_at TIMESTAMP NULL,
    last_error VARCHAR(1024) NULL,
    changed_at TIMESTAMP NOT NULL
);
-- Members that expired or left: listed as GONE, with when and why, for an hour.
CREATE TABLE ax_member_gone (
    group_name VARCHAR(64) NOT NULL,
    url VARCHAR(512) NOT NULL,
    gone_at TIMESTAMP NOT NULL,
    reason VARCHAR(255) NOT NULL,
    PRIMARY KEY (group_name, url)
);
