#!/usr/bin/env bash
# Open-ended fuzzing of every parser oprov has: each fuzz target runs for FUZZTIME (default 60s).
# This is not part of tests/run.sh, which only replays the committed inputs (testdata/fuzz) so
# that it gives one answer. Run this before a release, after changing a parser, and whenever a
# machine is idle; commit what it finds as a seed under the package's testdata/fuzz/ together
# with the fix (docs/development.md says how).
#
#   tests/fuzz.sh                        every target, 60s each
#   FUZZTIME=10m tests/fuzz.sh ./pkg/module   the targets of some packages only
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
FUZZTIME=${FUZZTIME:-60s}

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

# Every package with a fuzz target, unless packages are named.
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  mapfile -t pkgs < <(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's#^#./#')
fi
failed=0
for pkg in "${pkgs[@]}"; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    echo "-- $pkg $target ($FUZZTIME)"
    fuzz "$pkg" "$target" || { echo "fuzz target $target of $pkg failed: commit the input under $pkg/testdata/fuzz/$target/ with its fix"; failed=1; }
  done
done
exit $failed
