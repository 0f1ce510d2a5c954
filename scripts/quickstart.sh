#!/usr/bin/env bash
# Installs oprov and runs its main job on the example provider: package examples/hello for
# several platforms, push it, and inspect what was pushed. With no registry (the default), it
# then serves that layout with `oprov serve` and runs `tofu init` and `tofu apply` through
# network_mirror: from source to apply, on a fresh machine.
#
#   scripts/quickstart.sh                          push to an OCI layout in ./quickstart/layout, serve it, tofu apply
#   scripts/quickstart.sh HOST/PATH [push flags]   push to a registry repository instead
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}

echo "== installing oprov into $(go env GOPATH)/bin"
go install ./cmd/oprov
oprov=$(go env GOPATH)/bin/oprov

echo "== packaging examples/hello 1.0.0"
"$oprov" package --go examples/hello --version 1.0.0 \
  --platform linux_amd64,linux_arm64,darwin_arm64,windows_amd64 -o quickstart/dist

target=${1:-oci-layout:quickstart/layout}
registry=${1:-}
shift || true
echo "== pushing to $target"
"$oprov" push quickstart/dist "$target" --address example.com/acme/hello "$@"

echo "== inspecting"
"$oprov" inspect "$target:1.0.0" "$@"

if [ -z "$registry" ]; then
  bash scripts/quickstart-serve.sh "$oprov" quickstart/layout
fi
