UPDATE ax_task SET status = 'PAUSED' WHERE status = 'DISABLED';
ALTER TABLE ax_task ADD COLUMN dependency_timeout_secs INTEGER NULL;

CREATE TABLE ax_task_dependency (
    task_id BIGINT NOT NULL,
    depends_on BIGINT NOT NULL,
    PRIMARY KEY (task_id, depends_on)
);
CREATE INDEX idx_ax_task_dependency_upstream ON ax_task_dependency (depends_on);

ALTER TABLE ax_instance ADD COLUMN params TEXT NULL;
CREATE INDEX idx_ax_instance_scheduled ON ax_instance (scheduled_at, id);
CREATE INDEX idx_ax_instance_finished ON ax_instance (finished_at);

CREATE TABLE ax_meta (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
