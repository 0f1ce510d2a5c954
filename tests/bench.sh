#!/usr/bin/env bash
# Prints oprov's performance figures against the real peers (see each issue's targets).
#   tests/bench.sh                     5 platforms x 100 MiB
#   OPROV_BENCH_MB=20 tests/bench.sh   smaller zips
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bash tests/tools/install.sh)
export OPROV_TOOLS_DIR=$(dirname "$bin")
go test -run '^$' -bench "${BENCH:-.}" -benchtime 1x -timeout 60m ./tests/
