#!/usr/bin/env bash
# Load test of ax: builds the release binary and runs `ax bench` with the given options, e.g.
#   scripts/bench.sh --tasks 1000 --period 1 --duration 20 --store mysql --redis
# Prints one JSON line of figures on stdout (progress goes to stderr). `ax bench --help` lists
# the options. MariaDB (127.0.0.1:3306) and Redis (127.0.0.1:6379) are needed only for
# --store mysql and --redis.
#
#   scripts/bench.sh profile [--out DIR] <ax bench options>
# runs the same bench on the profiling build (release code with symbols and line tables) and
# records a CPU profile of ax during the window with Linux perf (Debian's linux-perf). It writes
# into DIR (default target/profile/<time>): report.json (the bench's line), perf.data,
# flame.svg (a flame graph, drawn by inferno from crates.io, installed when missing) and
# top.txt (the functions where ax spends its CPU, self time), and prints the top entries.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" != profile ]]; then
    cargo build --release --quiet
    exec target/release/ax bench "$@"
fi
shift
out="target/profile/$(date -u +%Y%m%dT%H%M%SZ)"
if [[ "${1:-}" == --out ]]; then
    out="$2"
    shift 2
fi
command -v perf >/dev/null || { echo "bench.sh: perf is missing: apt-get install linux-perf" >&2; exit 2; }
if ! command -v inferno-flamegraph >/dev/null; then
    echo "bench.sh: installing inferno (flame graphs) from crates.io" >&2
    cargo install inferno --locked --quiet
fi
mkdir -p "$out"
cargo build --profile profiling --quiet
target/profiling/ax bench --profile "$out/perf.data" "$@" | tee "$out/report.json"
perf script -i "$out/perf.data" 2>/dev/null | inferno-collapse-perf > "$out/stacks.folded"
inferno-flamegraph --title "ax: $*" < "$out/stacks.folded" > "$out/flame.svg"
perf report -i "$out/perf.data" --no-children -g none --sort symbol --percent-limit 0.5 --stdio \
    2>/dev/null | grep -v '^#' | grep '%' | sed 's/[ -]*$//' > "$out/top.txt" || true
echo "bench.sh: profile in $out (flame.svg, top.txt); top entries:" >&2
head -n 25 "$out/top.txt" >&2
