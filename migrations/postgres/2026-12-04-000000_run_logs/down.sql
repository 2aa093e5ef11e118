DROP TABLE ax_run_log_attempt;
DROP TABLE ax_run_log;
