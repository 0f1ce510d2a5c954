#!/usr/bin/env bash
# Installs oprov and runs its main job on the example provider: package examples/hello for
# several platforms, push it, and inspect what was pushed. With no registry (the default), it
# then serves that layout with `oprov serve` and runs `tofu init` and `tofu apply` through
# network_mirror: from source to apply, on a fresh machine.
#
#   scripts/quickstart.sh [push flags]             push to an OCI layout in quickstart/layout, serve it, tofu apply
#   scripts/quickstart.sh HOST/PATH [push flags]   push to a registry repository instead
#
# Push flags (--sign --key cosign.key, --concurrency 2, --legacy-tag, ...) go to 'oprov push'
# only. The flags that say how to reach the registry (--ca-file FILE, --plain-http,
# --registry-config FILE) go to 'oprov inspect' as well.
#
# QUICKSTART_DIR (default ./quickstart) receives dist/ and layout/; QUICKSTART_PLATFORMS
# (comma-separated OS_ARCH) overrides the platforms built; GOBIN is honoured.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
work=${QUICKSTART_DIR:-quickstart}
platforms=${QUICKSTART_PLATFORMS:-linux_amd64,linux_arm64,darwin_arm64,windows_amd64}

target=oci-layout:$work/layout
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  target=$1
  shift
fi
push_flags=()
reach_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --plain-http | --plain-http=* | --ca-file=* | --registry-config=*) reach_flags+=("$1") ;;
    --ca-file | --registry-config)
      [ $# -ge 2 ] || { echo "quickstart: $1 needs a value" >&2; exit 2; }
      reach_flags+=("$1" "$2")
      shift
      ;;
    *) push_flags+=("$1") ;;
  esac
  shift
done

bin=$(go env GOBIN)
bin=${bin:-$(go env GOPATH)/bin}
echo "== installing oprov into $bin"
CGO_ENABLED=0 go install ./cmd/oprov # static, as the README installs it
oprov=$bin/oprov

echo "== packaging examples/hello 1.0.0 for $platforms"
"$oprov" package --go examples/hello --version 1.0.0 --platform "$platforms" --out-dir "$work/dist"

echo "== pushing to $target"
"$oprov" push "$work/dist" "$target" --address example.com/acme/hello \
  ${reach_flags[@]+"${reach_flags[@]}"} ${push_flags[@]+"${push_flags[@]}"}

echo "== inspecting"
"$oprov" inspect "$target:1.0.0" ${reach_flags[@]+"${reach_flags[@]}"}

if [ "$target" = "oci-layout:$work/layout" ]; then
  bash scripts/quickstart-serve.sh "$oprov" "$work/layout"
fi
