CREATE TABLE ax_task (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    name VARCHAR(128) NOT NULL,
    scene VARCHAR(64) NOT NULL,
    cron VARCHAR(255) NOT NULL,
    handler_url VARCHAR(2048) NOT NULL,
    params TEXT NOT NULL,
    max_retry INTEGER NOT NULL DEFAULT 3,
    timeout_ms BIGINT NOT NULL DEFAULT 30000,
    status VARCHAR(16) NOT NULL,
    next_run_at TIMESTAMP NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX idx_ax_task_next_run ON ax_task (status, next_run_at);
CREATE INDEX idx_ax_task_scene ON ax_task (scene);

CREATE TABLE ax_instance (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    task_id BIGINT NOT NULL,
    request_id CHAR(36) NOT NULL,
    trigger_type VARCHAR(16) NOT NULL,
    scheduled_at TIMESTAMP NOT NULL,
    trigger_at TIMESTAMP NOT NULL,
    status VARCHAR(16) NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    retry_count INTEGER NOT NULL DEFAULT 0,
    callback_code VARCHAR(64) NULL,
    callback_message TEXT NULL,
    deadline_at TIMESTAMP NULL,
    fired_by VARCHAR(64) NOT NULL,
    created_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP NULL
);
CREATE UNIQUE INDEX uq_ax_instance_request ON ax_instance (request_id);
CREATE INDEX idx_ax_instance_task ON ax_instance (task_id, scheduled_at);
CREATE INDEX idx_ax_instance_status ON ax_instance (status, deadline_at);
