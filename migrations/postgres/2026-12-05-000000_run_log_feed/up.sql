-- The run feed reads the attempt logs updated since its last look.
CREATE INDEX idx_ax_run_log_attempt_updated ON ax_run_log_attempt (updated_at);
