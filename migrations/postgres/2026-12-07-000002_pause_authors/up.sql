-- Since when and by whom a task or a scene is paused, for the dashboard's attention list: set
-- when it is paused (by the token's name, as the audit log names it), cleared when it is
-- resumed. A task paused before this knew nothing better is paused since its last change.
ALTER TABLE ax_task
    ADD COLUMN paused_at TIMESTAMP(3) NULL,
    ADD COLUMN paused_by VARCHAR(64) NULL;
CREATE INDEX idx_ax_task_paused ON ax_task (status, paused_at);
UPDATE ax_task SET paused_at = updated_at WHERE status = 'PAUSED';
ALTER TABLE ax_scene ADD COLUMN paused_by VARCHAR(64) NULL;
