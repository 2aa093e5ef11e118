-- Console sign-ins: a row per session, keyed by a digest of the cookie's secret (the table alone
-- opens no session). The role is not kept: it is the named token's role at each request, so a
-- token taken out of the configuration ends its sessions.
CREATE TABLE ax_session (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    token_name VARCHAR(64) NOT NULL,
    created_at TIMESTAMP(3) NOT NULL,
    expires_at TIMESTAMP(3) NOT NULL
);
CREATE INDEX ax_session_expires ON ax_session (expires_at);
