#!/usr/bin/env bash
# Checks migrations/postgres on a scratch database: every up.sql in folder order, every down.sql
# in reverse order (which must leave nothing behind), every up.sql again (which must give the
# same schema as the first time), then the columns and primary keys against
# crates/ax-store/src/rows/schema.rs, the unique index the code matches on, and the triggers
# (task change feed, run-end alert events) against what the MySQL triggers write.
#
#   scripts/check-postgres-migrations.sh
#
# PGHOST, PGPORT and PGUSER pick the server (127.0.0.1, 5432, postgres by default).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MIGRATIONS="$ROOT/migrations/postgres"
SCHEMA_RS="$ROOT/crates/ax-store/src/rows/schema.rs"
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"

DB="ax_mig_check_$$_$(date +%s)_${RANDOM}"
WORK="$(mktemp -d)"
cleanup() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

psql -X -q -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$DB\"" >/dev/null
echo "scratch database: $DB"

mapfile -t FOLDERS < <(find "$MIGRATIONS" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)
[ "${#FOLDERS[@]}" -gt 0 ] || { echo "no migrations in $MIGRATIONS" >&2; exit 1; }

# Every folder of the other backends has its PostgreSQL twin, and none is left without one.
for other in mysql sqlite; do
    if ! diff <(ls "$ROOT/migrations/$other" | LC_ALL=C sort) <(printf '%s\n' "${FOLDERS[@]}") >/dev/null; then
        fail "migrations/postgres folders differ from migrations/$other"
    fi
done

# One file, in one transaction, as diesel's migration runner applies it.
apply() {
    local file="$1"
    if ! psql -X -q -v ON_ERROR_STOP=1 --single-transaction -d "$DB" -f "$file" >"$WORK/apply.log" 2>&1; then
        cat "$WORK/apply.log" >&2
        echo "FAIL: $file" >&2
        exit 1
    fi
    if grep -q 'ERROR\|WARNING' "$WORK/apply.log"; then
        cat "$WORK/apply.log" >&2
    fi
}

up_all() { for f in "${FOLDERS[@]}"; do apply "$MIGRATIONS/$f/up.sql"; done; }
dump() {
    pg_dump -s -O -x -d "$DB" >"$WORK/dump.raw"
    grep -v -e '^--' -e '^$' -e '^SET ' -e '^SELECT pg_catalog.set_config' \
        -e '^\\restrict' -e '^\\unrestrict' "$WORK/dump.raw" || true
}

# The first time, the schema after each up.sql is kept: each down.sql must give back the schema
# from before its up.sql, exactly (pg_dump's text, column order included).
dump >"$WORK/after_0.sql"
for ((i = 0; i < ${#FOLDERS[@]}; i++)); do
    apply "$MIGRATIONS/${FOLDERS[$i]}/up.sql"
    dump >"$WORK/after_$((i + 1)).sql"
done
echo "up:   ${#FOLDERS[@]} migrations applied"
cp "$WORK/after_${#FOLDERS[@]}.sql" "$WORK/first.sql"

for ((i = ${#FOLDERS[@]} - 1; i >= 0; i--)); do
    apply "$MIGRATIONS/${FOLDERS[$i]}/down.sql"
    dump >"$WORK/now.sql"
    if ! diff -u "$WORK/after_$i.sql" "$WORK/now.sql" >"$WORK/step.diff"; then
        cat "$WORK/step.diff" >&2
        fail "${FOLDERS[$i]}/down.sql does not give back the schema from before its up.sql"
    fi
done
echo "down: ${#FOLDERS[@]} migrations reverted, each to the schema before its up.sql"
left="$(q -c "SELECT c.relkind::text || ' ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'public'
              UNION ALL
              SELECT 'function ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'public'")"
if [ -n "$left" ]; then
    fail "left after every down.sql: $(echo "$left" | tr '\n' ' ')"
fi

up_all
echo "up:   ${#FOLDERS[@]} migrations applied again"
dump >"$WORK/second.sql"
if ! diff -u "$WORK/first.sql" "$WORK/second.sql" >"$WORK/dump.diff"; then
    cat "$WORK/dump.diff" >&2
    fail "the schema after up, down, up differs from the schema after the first up"
fi

# ---- schema.rs: every table and column, its type and nullability, and each primary key ----
awk '
/^diesel::table!/ { inb = 1; t = ""; next }
inb && t == "" && /\(.*\) *\{/ {
    line = $0; gsub(/^[ \t]+/, "", line)
    t = line; sub(/[ (].*/, "", t)
    pk = line; sub(/^[^(]*\(/, "", pk); sub(/\).*/, "", pk); gsub(/ /, "", pk)
    print "PK|" t "|" pk; next
}
inb && t != "" && /->/ {
    c = $1; ty = $0; sub(/.*-> */, "", ty); sub(/,[ \t]*$/, "", ty)
    n = "NO"
    if (ty ~ /^Nullable</) { n = "YES"; sub(/^Nullable</, "", ty); sub(/>$/, "", ty) }
    print "COL|" t "|" c "|" ty "|" n; next
}
/^}/ { inb = 0; t = "" }
' "$SCHEMA_RS" >"$WORK/schema_rs.txt"

q -c "SELECT table_name || '|' || column_name || '|' || data_type || '|' || is_nullable
      FROM information_schema.columns WHERE table_schema = 'public'" >"$WORK/pg_cols.txt"
q -c "SELECT c.conrelid::regclass::text || '|' || string_agg(a.attname, ',' ORDER BY k.ord)
      FROM pg_constraint c
      CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
      WHERE c.contype = 'p' AND c.connamespace = 'public'::regnamespace
      GROUP BY c.conrelid" >"$WORK/pg_pks.txt"

pg_type_for() {
    case "$1" in
        BigInt) echo "bigint" ;;
        Integer) echo "integer" ;;
        SmallInt) echo "smallint" ;;
        Text | Varchar) echo "character varying|text" ;;
        Timestamp) echo "timestamp without time zone" ;;
        Bool) echo "boolean" ;;
        Double) echo "double precision" ;;
        Float) echo "real" ;;
        Binary) echo "bytea" ;;
        *) echo "?" ;;
    esac
}

tables=0
columns=0
while IFS='|' read -r kind t a b c; do
    if [ "$kind" = PK ]; then
        tables=$((tables + 1))
        got="$(grep "^$t|" "$WORK/pg_pks.txt" | cut -d'|' -f2 || true)"
        if ! grep -q "^$t|" "$WORK/pg_cols.txt"; then
            fail "table $t (schema.rs) does not exist"
        elif [ "$got" != "$a" ]; then
            fail "$t: primary key ($got), schema.rs says ($a)"
        fi
        continue
    fi
    columns=$((columns + 1))
    col="$a" ty="$b" nullable="$c"
    row="$(grep "^$t|$col|" "$WORK/pg_cols.txt" || true)"
    if [ -z "$row" ]; then
        fail "column $t.$col (schema.rs) does not exist"
        continue
    fi
    got_type="$(echo "$row" | cut -d'|' -f3)"
    got_null="$(echo "$row" | cut -d'|' -f4)"
    want_type="$(pg_type_for "$ty")"
    if ! echo "$got_type" | grep -qxE "$want_type"; then
        fail "$t.$col is $got_type, schema.rs says $ty ($want_type)"
    fi
    if [ "$got_null" != "$nullable" ]; then
        fail "$t.$col nullable=$got_null, schema.rs says nullable=$nullable"
    fi
done <"$WORK/schema_rs.txt"
echo "schema.rs: $tables tables, $columns columns compared"

# Columns schema.rs does not name must not stop diesel's inserts: nullable or defaulted.
while IFS='|' read -r t col ty nullable; do
    if ! grep -q "^COL|$t|$col|" "$WORK/schema_rs.txt" && grep -q "^PK|$t|" "$WORK/schema_rs.txt"; then
        fail "$t.$col exists but schema.rs does not name it"
    fi
done <"$WORK/pg_cols.txt"
extra_tables="$(cut -d'|' -f1 "$WORK/pg_cols.txt" | sort -u | while read -r t; do
    grep -q "^PK|$t|" "$WORK/schema_rs.txt" || echo "$t"; done | tr '\n' ' ')"
[ -z "$extra_tables" ] || echo "tables not in schema.rs (raw SQL only): $extra_tables"

# ---- behaviour ----
expect() { # name, query, expected output
    local got
    got="$(q -c "$2" 2>&1)" || true
    if [ "$got" != "$3" ]; then
        fail "$1: got [$got], expected [$3]"
    else
        echo "ok: $1"
    fi
}

# The code matches this name in the duplicate-key error (pool/error.rs).
dup="$(q <<'SQL' 2>&1 || true
INSERT INTO ax_task (id, name, scene, cron, handler_url, params, status, created_at, updated_at)
VALUES (900, 'dup', 's', '* * * * *', 'http://x', '{}', 'ACTIVE', '2026-01-01', '2026-01-01');
INSERT INTO ax_task (name, scene, cron, handler_url, params, status, created_at, updated_at)
VALUES ('dup', 's', '* * * * *', 'http://x', '{}', 'ACTIVE', '2026-01-01', '2026-01-01');
SQL
)"
if echo "$dup" | grep -q 'uq_ax_task_scene_name'; then
    echo "ok: a second (scene, name) is refused by uq_ax_task_scene_name"
else
    fail "duplicate (scene, name): [$dup]"
fi
expect "names compare exactly (Dup is another task)" \
    "INSERT INTO ax_task (name, scene, cron, handler_url, params, status, created_at, updated_at)
     VALUES ('Dup', 's', '* * * * *', 'http://x', '{}', 'ACTIVE', '2026-01-01', '2026-01-01')
     RETURNING name" "Dup"
q -c "DELETE FROM ax_task; DELETE FROM ax_task_change;"

# Task change feed (MySQL: ax_task_created / ax_task_changed / ax_task_deleted): one row on an
# insert, on an update that raises the version or makes next_run_at NULL or not NULL, on a
# delete; none on an update that only moves next_run_at on (a fire's advance), at UTC now.
q <<'SQL'
INSERT INTO ax_task (id, name, scene, cron, handler_url, params, status, next_run_at, created_at, updated_at)
VALUES (42, 't', 's', '* * * * *', 'http://x', '{}', 'ACTIVE', '2026-01-01 00:00:01', '2026-01-01', '2026-01-01');
UPDATE ax_task SET next_run_at = '2026-01-01 00:00:02' WHERE id = 42;
UPDATE ax_task SET cron = '*/5 * * * *', version = version + 1 WHERE id = 42;
UPDATE ax_task SET next_run_at = NULL WHERE id = 42;
UPDATE ax_task SET updated_at = '2026-01-02' WHERE id = 42;
UPDATE ax_task SET next_run_at = '2026-01-01 00:00:03' WHERE id = 42;
DELETE FROM ax_task WHERE id = 42;
SQL
expect "task change feed: insert, version raised, next run taken, given back, delete" \
    "SELECT string_agg(task_id::text, ',' ORDER BY id) FROM ax_task_change" "42,42,42,42,42"
expect "task change feed: at is UTC now" \
    "SELECT bool_and(abs(EXTRACT(EPOCH FROM at - (now() AT TIME ZONE 'utc'))) < 60) FROM ax_task_change" "t"
expect "task change feed: ids from the identity, in order" \
    "SELECT count(DISTINCT id) FROM ax_task_change" "5"

# Run-end alert events (MySQL, as of alert_successes_by_writer): only while ax_alert_state row 1
# is enabled; an update to FAILED/MISSED/SKIPPED from another status writes one event with
# lag_ms = dispatched_at - trigger_at in ms and at = finished_at (or now); an insert born MISSED
# or SKIPPED writes one (at = finished_at or created_at, no lag_ms); nothing else does.
q <<'SQL'
INSERT INTO ax_instance (request_id, task_id, trigger_type, scheduled_at, trigger_at, status, fired_by, created_at)
VALUES ('r-off', 1, 'CRON', '2026-01-01', '2026-01-01', 'MISSED', 'p', '2026-01-01');
UPDATE ax_alert_state SET enabled = 1 WHERE id = 1;
INSERT INTO ax_instance (request_id, task_id, trigger_type, scheduled_at, trigger_at, status, fired_by, created_at, finished_at)
VALUES ('r-missed', 1, 'CRON', '2026-01-01', '2026-01-01', 'MISSED', 'p', '2026-01-01 00:00:05', NULL),
       ('r-skipped', 1, 'CRON', '2026-01-01', '2026-01-01', 'SKIPPED', 'p', '2026-01-01', '2026-01-01 00:00:06'),
       ('r-ready', 1, 'CRON', '2026-01-01', '2026-01-01 10:00:00', 'READY', 'p', '2026-01-01', NULL),
       ('r-ok', 1, 'CRON', '2026-01-01', '2026-01-01 10:00:00', 'READY', 'p', '2026-01-01', NULL);
UPDATE ax_instance SET status = 'RUNNING', dispatched_at = '2026-01-01 10:00:01.501' WHERE request_id IN ('r-ready', 'r-ok');
UPDATE ax_instance SET status = 'FAILED', callback_code = 'E', callback_message = 'boom',
       finished_at = '2026-01-01 10:00:09' WHERE request_id = 'r-ready';
UPDATE ax_instance SET callback_message = 'again' WHERE request_id = 'r-ready';
UPDATE ax_instance SET status = 'SUCCESS', finished_at = '2026-01-01 10:00:09' WHERE request_id = 'r-ok';
SQL
expect "alert events: born MISSED/SKIPPED, ended FAILED, only while enabled" \
    "SELECT string_agg(concat_ws('/', request_id, task_id, status, code, message, at, lag_ms), ' ' ORDER BY id) FROM ax_alert_event" \
    "r-missed/1/MISSED/2026-01-01 00:00:05 r-skipped/1/SKIPPED/2026-01-01 00:00:06 r-ready/1/FAILED/E/boom/2026-01-01 10:00:09/1501"
q -c "UPDATE ax_instance SET status = 'MISSED', finished_at = NULL, dispatched_at = NULL WHERE request_id = 'r-ok'"
expect "alert events: an end without finished_at is at UTC now, no lag without a dispatch" \
    "SELECT abs(EXTRACT(EPOCH FROM at - (now() AT TIME ZONE 'utc'))) < 60 AND lag_ms IS NULL
     FROM ax_alert_event WHERE request_id = 'r-ok'" "t"

# Seed rows and identities.
expect "ax_alert_state seed rows" "SELECT string_agg(id || ':' || enabled || ':' || watch_version, ',' ORDER BY id) FROM ax_alert_state" "1:1:0,2:0:0"
expect "explicit ids into identity columns" \
    "INSERT INTO ax_audit (id, at, actor, action, target, summary) VALUES (7, '2026-01-01', 'a', 'b', 'c', 'd') RETURNING id" "7"

if [ "$FAILURES" -gt 0 ]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
