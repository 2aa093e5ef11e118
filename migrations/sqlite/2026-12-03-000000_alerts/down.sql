DROP TRIGGER ax_alert_run_born_ended;
DROP TRIGGER ax_alert_run_ended;
ALTER TABLE ax_scene DROP COLUMN alerts;
ALTER TABLE ax_task DROP COLUMN alerts;
DROP TABLE ax_alert;
DROP TABLE ax_alert_fold;
DROP TABLE ax_alert_event;
DROP TABLE ax_alert_state;
