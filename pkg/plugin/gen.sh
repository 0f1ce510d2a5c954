#!/usr/bin/env bash
# Regenerates the tfplugin5/tfplugin6 Go messages from proto/oprov_tfplugin*.proto. Needs protoc
# (Debian: protobuf-compiler); protoc-gen-go is built here at a pinned version from the module
# proxy. No gRPC stubs are generated: the client is rpc.go (why: the .proto files' comment).
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
for v in 5 6; do
  mkdir -p tfplugin$v
  protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" -I proto \
    --go_out=tfplugin$v --go_opt=paths=source_relative oprov_tfplugin$v.proto
done
