-- Calendars: named sets of days off (dates, ranges, weekdays, as the API's JSON in `days`). A
-- task names the ones it excludes in `calendars` (`{"exclude": [...], "policy": ...}`); a
-- calendar's change raises the version of every task naming it, so the change feed carries it
-- to every process.
CREATE TABLE ax_calendar (
    name VARCHAR(64) COLLATE "C" NOT NULL PRIMARY KEY,
    days TEXT NOT NULL,
    updated_at TIMESTAMP(3) NOT NULL
);

ALTER TABLE ax_task ADD COLUMN calendars TEXT NULL;
