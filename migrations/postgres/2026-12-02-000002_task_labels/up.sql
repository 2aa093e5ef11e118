-- A task's labels: a JSON object of string keys to string values, written by ax in one form
-- (keys in order, no spaces), so the task list finds a label as text in it. Compared as bytes
-- (COLLATE "C"): a label filter matches case and all, as on SQLite. Existing tasks have none.
ALTER TABLE ax_task
    ADD COLUMN labels TEXT COLLATE "C" NOT NULL DEFAULT '{}';

-- The task list finds a label with `instr`, which MySQL and SQLite have built in: PostgreSQL's
-- own is `strpos`, under the common name.
CREATE FUNCTION instr(haystack TEXT, needle TEXT) RETURNS INTEGER
    LANGUAGE SQL IMMUTABLE STRICT PARALLEL SAFE
    RETURN strpos(haystack, needle);
