CREATE TABLE ax_task (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(128) NOT NULL,
    scene VARCHAR(64) NOT NULL,
    cron VARCHAR(255) NOT NULL,
    handler_url VARCHAR(2048) NOT NULL,
    params MEDIUMTEXT NOT NULL,
    max_retry INT NOT NULL DEFAULT 3,
    timeout_ms BIGINT NOT NULL DEFAULT 30000,
    status VARCHAR(16) NOT NULL,
    next_run_at DATETIME(3) NULL,
    created_at DATETIME(3) NOT NULL,
    updated_at DATETIME(3) NOT NULL,
    INDEX idx_ax_task_next_run (status, next_run_at),
    INDEX idx_ax_task_scene (scene)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE ax_instance (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id BIGINT NOT NULL,
    request_id CHAR(36) NOT NULL,
    trigger_type VARCHAR(16) NOT NULL,
    scheduled_at DATETIME(3) NOT NULL,
    trigger_at DATETIME(3) NOT NULL,
    status VARCHAR(16) NOT NULL,
    attempt INT NOT NULL DEFAULT 1,
    retry_count INT NOT NULL DEFAULT 0,
    callback_code VARCHAR(64) NULL,
    callback_message TEXT NULL,
    deadline_at DATETIME(3) NULL,
    fired_by VARCHAR(64) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    finished_at DATETIME(3) NULL,
    UNIQUE INDEX uq_ax_instance_request (request_id),
    INDEX idx_ax_instance_task (task_id, scheduled_at),
    INDEX idx_ax_instance_status (status, deadline_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
