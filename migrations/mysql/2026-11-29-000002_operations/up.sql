UPDATE ax_task SET status = 'PAUSED' WHERE status = 'DISABLED';
ALTER TABLE ax_task ADD COLUMN dependency_timeout_secs INT NULL;

CREATE TABLE ax_task_dependency (
    task_id BIGINT NOT NULL,
    depends_on BIGINT NOT NULL,
    PRIMARY KEY (task_id, depends_on),
    INDEX idx_ax_task_dependency_upstream (depends_on)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

ALTER TABLE ax_instance
    ADD COLUMN params MEDIUMTEXT NULL,
    ADD INDEX idx_ax_instance_scheduled (scheduled_at, id),
    ADD INDEX idx_ax_instance_finished (finished_at);

CREATE TABLE ax_meta (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
