#!/usr/bin/env bash
# Writes THIRD_PARTY_NOTICES: the license and notice files of every Go module built into the
# release's executables (oprov and oprov-sandbox, for every platform .goreleaser.yaml builds),
# and of the Go standard library, each with its license's SPDX name. The release puts the file in
# every archive and package beside LICENSE. A module without a license file, or with one this
# script cannot name, stops it: nothing unnamed ships.
#
#   scripts/notices.sh           regenerate THIRD_PARTY_NOTICES
#   scripts/notices.sh --check   fail if it differs from what the modules would give (tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false} CGO_ENABLED=0
# The platforms of .goreleaser.yaml's builds: a module only one of them links is shipped too.
platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
out=THIRD_PARTY_NOTICES
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# spdx names a license file's license by its words, or prints nothing.
spdx() {
  local text
  text=$(tr -s '[:space:]' ' ' <"$1" | tr '[:upper:]' '[:lower:]')
  case "$text" in
  *"apache license"*"version 2.0"*) echo Apache-2.0 ;;
  *"mozilla public license version 2.0"* | *"mozilla public license, version 2.0"*) echo MPL-2.0 ;;
  *"permission is hereby granted, free of charge"*) echo MIT ;;
  *"redistribution and use in source and binary forms"*"neither the name"*) echo BSD-3-Clause ;;
  *"redistribution and use in source and binary forms"*"names of its contributors"*) echo BSD-3-Clause ;;
  *"redistribution and use in source and binary forms"*) echo BSD-2-Clause ;;
  *"permission to use, copy, modify, and"*"distribute this software for any"*) echo ISC ;;
  *"this is free and unencumbered software released into the public domain"*) echo Unlicense ;;
  *"attribution-sharealike 4.0 international"*) echo CC-BY-SA-4.0 ;; # documentation (go-digest's LICENSE.docs)
  *"attribution 4.0 international"*) echo CC-BY-4.0 ;;
  esac
}

# files lists a module directory's license and notice files, sorted.
files() {
  find "$1" -maxdepth 1 -type f \( -iname 'LICEN[CS]E*' -o -iname 'COPYING*' -o -iname 'NOTICE*' \) ! -iname '*.go' | LC_ALL=C sort
}

# section writes one module's (or the standard library's) entry: its name, its licenses, then
# each file. An Apache-2.0 text that is the one in LICENSE is named, not repeated.
section() {
  local name=$1 dir=$2 f names="" lic
  local list
  list=$(files "$dir")
  for f in $list; do
    case "$(basename "$f")" in [Nn][Oo][Tt][Ii][Cc][Ee]*) continue ;; esac
    lic=$(spdx "$f")
    if [ -z "$lic" ]; then
      echo "notices: $name: cannot name the license of $f; add its words to spdx() in $0" >&2
      exit 1
    fi
    names="$names${names:+, }$lic"
  done
  if [ -z "$names" ]; then
    echo "notices: $name ($dir) holds no license file" >&2
    exit 1
  fi
  printf '%s\n' "================================================================================"
  printf '%s\n' "$name ($names)"
  for f in $list; do
    printf '%s\n' "--- $(basename "$f")"
    if [ "$(spdx "$f")" = Apache-2.0 ] && diff -qbB "$f" LICENSE >/dev/null 2>&1; then
      printf '%s\n' "The Apache License, Version 2.0: the text of LICENSE."
      continue
    fi
    sed -e 's/[[:space:]]*$//' "$f"
  done
  printf '\n'
}

modules=$(for p in $platforms; do
  GOOS=${p%/*} GOARCH=${p#*/} go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/oprov ./cmd/oprov-sandbox
done | LC_ALL=C sort -u)

{
  cat <<'EOF'
Third-party software in oprov

oprov and oprov-sandbox, as released, are built from oprov's own code (LICENSE: Apache-2.0),
the Go standard library and the Go modules below. Each is listed with its licenses (SPDX
names), then its license and notice files as the module holds them.

Written by scripts/notices.sh from the modules go.mod selects; do not edit by hand.

EOF
  section "Go standard library" "$(go env GOROOT)"
  while read -r path version dir; do
    [ -n "$path" ] || continue
    section "$path $version" "$dir"
  done <<<"$modules"
} >"$tmp"

if [ "${1:-}" = "--check" ]; then
  if ! diff -u "$out" "$tmp"; then
    echo "$out is out of date with the modules the release builds (above: what would change)."
    echo "Regenerate with: scripts/notices.sh   and commit the result."
    exit 1
  fi
  echo "$out matches the modules the release builds"
  exit 0
fi
cp "$tmp" "$out"
chmod 0644 "$out"
echo "wrote $out ($(grep -c '^=====' "$out") entries)"
