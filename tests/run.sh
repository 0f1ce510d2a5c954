#!/usr/bin/env bash
# Runs every test oprov has: formatting and vet, unit tests, end-to-end tests against real peers
# (built and cached by tests/tools/install.sh), a short fuzz of every parser, and a small smoke run
# of the benchmarks so they cannot rot. .ci/run calls exactly this.
#
#   tests/run.sh                 everything
#   FUZZTIME=30s tests/run.sh    fuzz longer (default 8s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
FUZZTIME=${FUZZTIME:-8s}

step() { printf '\n== %s\n' "$*"; }

step "installing test peers (cached after the first run)"
bin=$(bash tests/tools/install.sh)
export OPROV_TOOLS_DIR=$(dirname "$bin")

step "gofmt and go vet"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi
go vet ./...
for ex in examples/*/go.mod tests/providers/*/go.mod; do (cd "$(dirname "$ex")" && go vet ./...); done

step "unit and end-to-end tests"
go test -count=1 -timeout 30m ./...

step "fuzzing each parser for $FUZZTIME"
for pkg in ./manifest ./pkg/release ./pkg/serve ./pkg/artifact ./pkg/oci ./cmd/oprov; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | grep -v '^fuzz: elapsed' || { echo "fuzz target $target failed"; exit 1; }
  done
done

step "benchmark smoke run (2 MiB per platform; tests/bench.sh runs the real sizes)"
OPROV_BENCH_MB=2 go test -run '^$' -bench . -benchtime 1x -timeout 10m ./tests/ | grep -E 'ratio|RSS|h1:|^ok|FAIL'
