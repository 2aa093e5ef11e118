-- A session is bound to the token it signed in with: a digest of the token keyed with the
-- signing secret (never the token), compared with the token configured now at each request,
-- so a token changed or removed ends its sessions. Sessions opened before have none: they end.
-- (MySQL CHAR(64): VARCHAR here, which neither pads nor compares with padding.)
ALTER TABLE ax_session ADD COLUMN token_digest VARCHAR(64) NOT NULL DEFAULT '';
