#!/usr/bin/env bash
# Runs every test oprov has: formatting and vet, unit tests, end-to-end tests against real peers
# (built and cached by tests/tools/install.sh), every committed fuzz input of every parser replayed as
# a test (go test does that with testdata/fuzz), and a small smoke run of the benchmarks so they
# cannot rot. .ci/run calls exactly this. It is deterministic: open-ended fuzzing, which can find
# an input nobody has seen, is tests/fuzz.sh, a command of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
# One build configuration for vet, the unit tests and the oprov the end-to-end tests build: the
# static build the README installs. With cgo on (the default where a C compiler is found), net,
# os/user, psx and everything above them compile twice, and the unit tests would test another
# variant of the sandbox's psx than the one shipped.
export CGO_ENABLED=${CGO_ENABLED:-0}

step() { printf '\n== %s\n' "$*"; }

step "tests/tools/install.sh fails loudly on a failed build (a fake go; nothing real is built)"
bash tests/tools/install_test.sh

step "installing test peers (cached after the first run)"
bin=$(bash tests/tools/install.sh)
bash tests/tools/install.sh goreleaser >/dev/null # the release's image test (tests/image_test.go)
export OPROV_TOOLS_DIR=$(dirname "$bin")

step "gofmt and go vet"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi
go vet ./...
go vet -tags gendocs ./cmd/oprov
# -trimpath as oprov builds providers from source (pkg/gobuild): the dependencies vet
# compiles are then the ones the end-to-end tests' provider builds find in the cache.
for ex in examples/*/go.mod tests/providers/*/go.mod; do (cd "$(dirname "$ex")" && go vet -trimpath ./...); done

step "every release platform builds and vets (linux, darwin, windows on amd64 and arm64)"
# Each build shares the build cache, with -trimpath as the release builds (.goreleaser.yaml): the
# vets and the snapshot release test (tests/release_test.go) then find these packages compiled.
# Vet type-checks the tests too. The end-to-end suite (./tests/...) drives POSIX processes and
# signals: vetted for darwin, not windows. linux/amd64 is vetted above.
windows_pkgs=$(go list ./... | grep -v '/tests\(/\|$\)')
for target in linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
  os=${target%/*} arch=${target#*/} pkgs=./...
  [ "$os" = windows ] && pkgs=$windows_pkgs
  GOOS=$os GOARCH=$arch go build -trimpath -o /dev/null ./cmd/oprov ./cmd/oprov-sandbox ||
    { echo "build failed for $target"; exit 1; }
  # shellcheck disable=SC2086
  GOOS=$os GOARCH=$arch go vet -trimpath $pkgs || { echo "go vet failed for $target"; exit 1; }
done

step "the command reference and man pages match the CLI (docs/reference, docs/man)"
bash scripts/gendocs.sh --check

step "THIRD_PARTY_NOTICES lists the modules the release builds in, with their licenses"
bash scripts/notices.sh --check

step "unit and end-to-end tests (the documentation's links and examples among them)"
go test -count=1 -timeout 50m ./...

step "benchmark smoke run (2 MiB per platform; tests/bench.sh runs the real sizes)"
bench_out=$(mktemp)
if ! OPROV_BENCH_MB=2 go test -run '^$' -bench . -benchtime 1x -timeout 30m ./tests/ >"$bench_out" 2>&1; then
  cat "$bench_out"; rm -f "$bench_out"; echo "benchmark smoke run failed"; exit 1
fi
grep -E 'ratio|RSS|h1:|^ok|FAIL' "$bench_out"; rm -f "$bench_out"
