-- Who changed what and when: one row per change through the API (and so the console and the
-- CLI), with the token's name as the actor and a short before/after summary.
CREATE TABLE ax_audit (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    at TIMESTAMP NOT NULL,
    actor VARCHAR(64) NOT NULL,
    action VARCHAR(32) NOT NULL,
    target VARCHAR(255) NOT NULL,
    summary TEXT NOT NULL
);
