#!/usr/bin/env bash
# Writes the command reference from the CLI itself: docs/reference/*.md (one page per command)
# and docs/man/*.1, from the same cobra commands and help texts 'oprov --help' prints. Help texts
# are the one source of what a flag means: change them in cmd/oprov, then run this.
#
#   scripts/gendocs.sh           regenerate docs/reference and docs/man
#   scripts/gendocs.sh --check   fail if they differ from what the code would generate (tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The gendocs build tag adds the hidden __gendocs command (cmd/oprov/gendocs.go), so the oprov
# people run does not carry cobra/doc.
go run -tags gendocs ./cmd/oprov __gendocs "$tmp"
if [ "${1:-}" = "--check" ]; then
  drift=0
  diff -ru docs/reference "$tmp/reference" || drift=1
  diff -ru docs/man "$tmp/man" || drift=1
  if [ "$drift" = 1 ]; then
    echo "docs/reference or docs/man is out of date with the CLI's help texts (above: what would change)."
    echo "Regenerate with: scripts/gendocs.sh   and commit the result."
    exit 1
  fi
  echo "docs/reference and docs/man match the CLI"
  exit 0
fi
rm -rf docs/reference docs/man
mv "$tmp/reference" docs/reference
mv "$tmp/man" docs/man
echo "wrote docs/reference ($(ls docs/reference | wc -l) pages) and docs/man ($(ls docs/man | wc -l) pages)"
