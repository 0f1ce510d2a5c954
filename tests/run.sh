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
go vet -tags gendocs ./cmd/oprov
for ex in examples/*/go.mod tests/providers/*/go.mod; do (cd "$(dirname "$ex")" && go vet ./...); done

step "the command reference and man pages match the CLI (docs/reference, docs/man)"
bash scripts/gendocs.sh --check

step "unit and end-to-end tests (the documentation's links and examples among them)"
go test -count=1 -timeout 30m ./...

# fuzz runs one target. On a loaded machine the fuzzer can run out of its time before it starts
# ("context deadline exceeded", no failing input written): that run is tried once more. A real
# failure (a failing input written, or anything else) fails at once.
fuzz() {
  local out try
  for try in 1 2; do
    if out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" 2>&1); then
      grep -v '^fuzz: elapsed' <<<"$out"; return 0
    fi
    grep -v '^fuzz: elapsed' <<<"$out"
    if grep -q 'Failing input written' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out"; then return 1; fi
    echo "(the fuzzer ran out of time before fuzzing; trying once more)"
  done
  return 1
}

step "fuzzing each parser for $FUZZTIME"
for pkg in ./manifest ./pkg/bundle ./pkg/release ./pkg/pkghash ./internal/unzip ./internal/bindelta ./internal/tofufiles ./internal/build/pybuild ./pkg/serve ./pkg/stdiohost ./pkg/artifact ./pkg/modulepkg ./pkg/module ./pkg/oci ./cmd/oprov ./pkg/sandbox ./loader/config ./internal/doccheck; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    echo "-- $pkg $target"
    fuzz "$pkg" "$target" || { echo "fuzz target $target failed"; exit 1; }
  done
done

step "benchmark smoke run (2 MiB per platform; tests/bench.sh runs the real sizes)"
bench_out=$(mktemp)
if ! OPROV_BENCH_MB=2 go test -run '^$' -bench . -benchtime 1x -timeout 30m ./tests/ >"$bench_out" 2>&1; then
  cat "$bench_out"; rm -f "$bench_out"; echo "benchmark smoke run failed"; exit 1
fi
grep -E 'ratio|RSS|h1:|^ok|FAIL' "$bench_out"; rm -f "$bench_out"
