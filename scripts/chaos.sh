#!/usr/bin/env bash
# The chaos suite: builds ax and runs `ax bench chaos` with the given options, e.g.
#   scripts/chaos.sh                                  # every scenario, 90 s windows (~25 min)
#   scripts/chaos.sh --short --scenarios kill-9,redis-kill
#   scripts/chaos.sh --debug --short                  # the debug build (no release build)
# It starts its own MariaDB (mariadb-install-db into a temporary folder), its own Redis and
# Sentinels, 3 ax processes and a recording executor, all on loopback (net-cut adds a network
# namespace and a veth pair on 169.254.N.0/30, removed at the end); it never touches the
# MariaDB or Redis of 3306/6379. Run as root: net-cut needs CAP_NET_ADMIN and MariaDB runs with
# --user=root. Prints the table on stdout (`--json`: one JSON line); exit 1 when a scenario
# lost a run (see `ax bench chaos --help`). Needs mariadb-server, redis-server and faketime
# (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
if [[ "${1:-}" == --debug ]]; then
    profile=debug
    shift
fi
for program in mariadbd mariadb-install-db redis-server; do
    command -v "$program" >/dev/null || {
        echo "chaos.sh: $program is missing (apt-get install mariadb-server redis-server)" >&2
        exit 2
    }
done
if [[ $profile == release ]]; then
    cargo build --release --quiet
else
    cargo build --quiet
fi
exec "target/$profile/ax" bench chaos "$@"
