#!/usr/bin/env bash
# Regenerates the tfplugin5/tfplugin6 Go stubs from proto/*.proto. Needs protoc (Debian:
# protobuf-compiler); the Go plugins are built here at pinned versions from the module proxy.
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
for v in 5 6; do
  mkdir -p tfplugin$v
  protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
    -I proto --go_out=tfplugin$v --go_opt=paths=source_relative \
    --go-grpc_out=tfplugin$v --go-grpc_opt=paths=source_relative tfplugin$v.proto
done
