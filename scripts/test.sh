#!/usr/bin/env bash
# Runs every test of ax: unit tests (cron, wheel, scheduling decisions), integration tests on
# both stores (embedded SQLite and MariaDB) with Redis, end-to-end tests that start ax with a
# real HTTP executor, and the console in headless Chromium (screenshots in target/screenshots/).
# Starts MariaDB, Redis and PostgreSQL if they are installed but stopped; fails loudly if they
# are missing.
# Installs Chromium and its driver from Debian's packages when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

MYSQL_HOST=127.0.0.1 MYSQL_PORT=3306 REDIS_PORT=6379

wait_for() { # name, seconds, command...
  local name=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$seconds"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "test.sh: $name did not come up within ${seconds}s" >&2; exit 1
}

mariadb_up() { mysqladmin --protocol=tcp -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot ping; }
if ! mariadb_up >/dev/null 2>&1; then
  if [ -x /usr/sbin/mariadbd ]; then
    echo "test.sh: starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    wait_for MariaDB 60 mariadb_up
  else
    echo "test.sh: MariaDB is not running on $MYSQL_HOST:$MYSQL_PORT and is not installed" >&2
    exit 1
  fi
fi

redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping | grep -q PONG; }
if ! redis_up >/dev/null 2>&1; then
  if command -v redis-server >/dev/null; then
    echo "test.sh: starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no
    wait_for Redis 30 redis_up
  else
    echo "test.sh: Redis is not running on 127.0.0.1:$REDIS_PORT and is not installed" >&2
    exit 1
  fi
fi

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q; }
if ! pg_up >/dev/null 2>&1; then
  if [ -d /etc/postgresql ]; then
    echo "test.sh: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
    wait_for PostgreSQL 60 pg_up
  else
    echo "test.sh: PostgreSQL is not running on 127.0.0.1:5432 and is not installed" >&2
    exit 1
  fi
fi

# The console's browser tests drive Debian's Chromium through its chromedriver; nothing
# downloads a browser build.
install_chromium() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver
}
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "test.sh: installing chromium and chromium-driver"
  # The package lists are refreshed only when they are too old to install from.
  install_chromium || { apt-get update && install_chromium; }
fi

# The cluster tests start processes with skewed clocks under Debian's libfaketime.
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then
  echo "test.sh: installing faketime"
  install_faketime() { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends faketime; }
  install_faketime || { apt-get update && install_faketime; }
fi

# The OpenAPI document is checked by an independent validator, from PyPI.
if ! python3 -c "import openapi_spec_validator" >/dev/null 2>&1; then
  echo "test.sh: installing openapi-spec-validator"
  python3 -m pip install --quiet openapi-spec-validator
fi

# PostgreSQL's schema (migrations/postgres): up, down and up again on a scratch database, its
# columns against the diesel schema, its triggers.
scripts/check-postgres-migrations.sh

cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings

# The load tool at a tiny size, to prove it works end to end (figures: README, Performance).
report=$(cargo run --quiet -- bench --tasks 10 --period 1 --warmup 2 --duration 3)
echo "$report"
echo "$report" | grep -q '"lost":0,' && echo "$report" | grep -q '"duplicate_rows":0,' || {
  echo "test.sh: the load tool lost runs or duplicated rows" >&2
  exit 1
}
echo "$report" | grep -q '"per_fire":{"ax_cpu_us":[0-9]' || {
  echo "test.sh: the load tool measured no cost per fire" >&2
  exit 1
}

# The chaos suite, short (docs/delivery.md, Faults under load), to prove it works end to end: a
# process killed under 100 fires/s on its own MariaDB and Redis (never those above); exits 1
# when a run is lost, which fails this script. A process paused and the database stalled are
# the cluster and outage tests' (tests/alone/cluster.rs, tests/all/outage.rs).
cargo run --quiet -- bench chaos --short --scenarios kill-9

# The console bench at a tiny size, to prove it works end to end (figures at size: README,
# Console at size): seeds its own database (kept, ax_console_bench_tiny) and times every page;
# it fails if a page does not answer 200.
report=$(cargo run --quiet -- bench console --tasks 100 --runs 1000 --scenes 10 --audit 100 \
  --database ax_console_bench_tiny --requests 2 --warmup 1)
echo "$report"
echo "$report" | grep -q '"pages":\[{"name":"dashboard"' || {
  echo "test.sh: the console bench measured no page" >&2
  exit 1
}

# The executor SDKs (sdk/), each tested end to end against a real ax: this build's binary.
cargo build --quiet --bin ax
AX_BIN="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/ax"
export AX_BIN
# Node: the package's tests, its types checked by TypeScript (a dev dependency, from npm).
(cd sdk/node && npm install --no-audit --no-fund --silent)
node --test sdk/node/test/
# Python: standard library only, the machine's python3; and installable with pip.
python3 -m unittest discover -s sdk/python/tests -t sdk/python
venv=$(mktemp -d)
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet ./sdk/python
"$venv/bin/python" -c "import ax_executor; ax_executor.Executor"
rm -rf "$venv"

# A failing test's message, not 50 frames of backtrace, is what the end of the log shows.
export RUST_BACKTRACE=0
cargo test "$@"

