ALTER TABLE ax_task DROP COLUMN calendars;
DROP TABLE ax_calendar;
