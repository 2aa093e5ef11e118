-- Who changed what and when: one row per change through the API (and so the console and the
-- CLI), with the token's name as the actor and a short before/after summary.
CREATE TABLE ax_audit (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at DATETIME(3) NOT NULL,
    actor VARCHAR(64) NOT NULL,
    action VARCHAR(32) NOT NULL,
    target VARCHAR(255) NOT NULL,
    summary TEXT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
