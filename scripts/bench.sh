#!/usr/bin/env bash
# Load test of ax: builds the release binary and runs `ax bench` with the given options, e.g.
#   scripts/bench.sh --tasks 1000 --period 1 --duration 20 --store mysql --redis
# Prints one JSON line of figures on stdout (progress goes to stderr). `ax bench --help` lists
# the options. MariaDB (127.0.0.1:3306) and Redis (127.0.0.1:6379) are needed only for
# --store mysql and --redis.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec target/release/ax bench "$@"
