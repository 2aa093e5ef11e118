-- A task's version: raised by every change of its definition (an update, a pause, a resume),
-- not by the scheduler moving next_run_at on. The API sends it as the task's ETag, and a
-- write with If-Match compares it in its own UPDATE, so of two writers one wins.
ALTER TABLE ax_task ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
-- A scene's own pause, beside its tasks' (a task fires when neither it nor its scene is
-- paused; its next_run_at is NULL otherwise). Every writer of a task's next run locks its
-- scene's row first, made when first needed, so a task written while its scene pauses cannot
-- keep a next run. Scenes compare exactly, as tasks' do (COLLATE "C": MySQL's utf8mb4_bin).
CREATE TABLE ax_scene (
    scene VARCHAR(64) COLLATE "C" NOT NULL PRIMARY KEY,
    paused_at TIMESTAMP(3) NULL
);
