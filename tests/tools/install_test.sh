#!/usr/bin/env bash
# Checks that tests/tools/install.sh fails loudly when a build fails, without building anything
# real: a fake 'go' on PATH fails the step under test, and the script must exit non-zero, name the
# step, and leave no directory in the cache that a later run would take for a finished build.
#
#   bash tests/tools/install_test.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fails=0

# fake_go MODE: a 'go' that answers 'go env GOPROXY' with a local proxy holding OpenTofu's go.mod,
# and whose build steps do what MODE says: "fail-build" (go build exits 2), "empty-install"
# (go install exits 0 and writes nothing).
fake_go() {
  mkdir -p "$work/fake" "$work/proxy/github.com/opentofu/opentofu/@v"
  printf 'module github.com/opentofu/opentofu\n' > "$work/proxy/github.com/opentofu/opentofu/@v/$1.mod"
  cat > "$work/fake/go" <<SH
#!/bin/sh
case "\$*" in
  "env GOPROXY") echo "file://$work/proxy" ;;
  *" build "*) [ "$2" = fail-build ] && { echo "fake go: build failed" >&2; exit 2; }; exit 0 ;;
  install*) [ "$2" = empty-install ] && exit 0; exit 0 ;;
  *) exit 0 ;;
esac
SH
  chmod 755 "$work/fake/go"
}

# check NAME TOOL MODE WANT: runs install.sh TOOL with the fake go in MODE; it must exit non-zero,
# print WANT on stderr, and leave neither TOOL-* nor .tmp-* in the cache.
check() {
  local name=$1 tool=$2 mode=$3 want=$4 cache="$work/cache-$1"
  fake_go "$(sed -n 's/^TOFU_VERSION=\([^ ]*\).*/\1/p' "$here/install.sh")" "$mode"
  local rc=0
  OPROV_TOOLS_DIR="$cache" PATH="$work/fake:$PATH" bash "$here/install.sh" "$tool" >"$work/out" 2>"$work/err" || rc=$?
  local left; left=$(cd "$cache" 2>/dev/null && ls -d "$tool"-* .tmp-* 2>/dev/null)
  if [ "$rc" -eq 0 ]; then echo "FAIL $name: install.sh $tool exited 0 after a failed build"; fails=1; fi
  if ! grep -qF -- "$want" "$work/err"; then echo "FAIL $name: stderr does not say \"$want\":"; sed 's/^/    /' "$work/err"; fails=1; fi
  if [ -n "$left" ]; then echo "FAIL $name: the failed build left in the cache: $left"; fails=1; fi
  [ "$fails" -eq 0 ] && echo "ok   $name"
}

check tofu-build-fails tofu fail-build "tofu: FAILED (go build github.com/opentofu/opentofu/cmd/tofu, exit 2)"
check install-writes-nothing registry empty-install "registry: FAILED (the build left no executable registry)"
exit "$fails"
