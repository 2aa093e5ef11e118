ALTER TABLE ax_session DROP COLUMN token_digest;
