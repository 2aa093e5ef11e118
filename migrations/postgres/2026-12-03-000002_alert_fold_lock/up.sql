-- The folders' turn-taking lock, apart from row 1: every run's end reads row 1 (its
-- trigger's INSERT … SELECT takes a shared lock on it), so a folder holding row 1 for its
-- transaction held up every result commit meanwhile.
INSERT INTO ax_alert_state (id, enabled) VALUES (2, 0);
