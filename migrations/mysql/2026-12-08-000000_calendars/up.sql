-- Calendars: named sets of days off (dates, ranges, weekdays, as the API's JSON in `days`). A
-- task names the ones it excludes in `calendars` (`{"exclude": [...], "policy": ...}`); a
-- calendar's change raises the version of every task naming it, so the change feed carries it
-- to every process.
CREATE TABLE ax_calendar (
    name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    days MEDIUMTEXT NOT NULL,
    updated_at DATETIME(3) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

ALTER TABLE ax_task ADD COLUMN calendars TEXT NULL;
