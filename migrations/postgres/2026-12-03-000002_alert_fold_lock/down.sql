DELETE FROM ax_alert_state WHERE id = 2;
