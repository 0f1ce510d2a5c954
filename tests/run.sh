#!/usr/bin/env bash
# Runs every test oprov has: formatting and vet, unit tests, end-to-end tests against real peers
# (built and cached by tests/tools/install.sh), every committed fuzz input of every parser replayed as
# a test (go test does that with testdata/fuzz), and a small smoke run of the benchmarks so they
# cannot rot. .ci/run calls exactly this. It is deterministic: open-ended fuzzing, which can find
# an input nobody has seen, is tests/fuzz.sh, a command of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}

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

step "every release platform builds and vets (linux, darwin, windows on amd64 and arm64)"
# go vet type-checks tests too, and shares the build cache with go build. The end-to-end suite
# (./tests/...) drives POSIX processes and signals: vetted for linux and darwin, not windows.
for os in linux darwin windows; do
  for arch in amd64 arm64; do
    pkgs=./...
    if [ "$os/$arch" = linux/amd64 ]; then pkgs=; fi # vetted above
    if [ "$os" = windows ]; then pkgs=$(go list ./... | grep -v '/tests\(/\|$\)'); fi
    GOOS=$os GOARCH=$arch CGO_ENABLED=0 go build -o /dev/null ./cmd/oprov ./cmd/oprov-sandbox 2>&1 || { echo "build failed for $os/$arch"; exit 1; }
    # shellcheck disable=SC2086
    [ -z "$pkgs" ] || GOOS=$os GOARCH=$arch go vet $pkgs || { echo "go vet failed for $os/$arch"; exit 1; }
  done
done

step "the command reference and man pages match the CLI (docs/reference, docs/man)"
bash scripts/gendocs.sh --check

step "unit and end-to-end tests (the documentation's links and examples among them)"
go test -count=1 -timeout 30m ./...

step "benchmark smoke run (2 MiB per platform; tests/bench.sh runs the real sizes)"
bench_out=$(mktemp)
if ! OPROV_BENCH_MB=2 go test -run '^$' -bench . -benchtime 1x -timeout 30m ./tests/ >"$bench_out" 2>&1; then
  cat "$bench_out"; rm -f "$bench_out"; echo "benchmark smoke run failed"; exit 1
fi
grep -E 'ratio|RSS|h1:|^ok|FAIL' "$bench_out"; rm -f "$bench_out"
