#!/usr/bin/env bash
# Builds the real peers that oprov's end-to-end tests talk to, at pinned versions, from the
# Go module proxy, and caches them outside the repository.
#
#   tests/tools/install.sh          build what is missing, print the bin directory
#   tests/tools/install.sh tofu     only the tools named (registry, cosign, tofu, terraform)
#   OPROV_TOOLS_DIR=/some/dir ...   cache somewhere else (default ~/.cache/oprov-tools)
#
# Each tool lands in $OPROV_TOOLS_DIR/<name>-<version>/ and is linked into
# $OPROV_TOOLS_DIR/bin. A build that fails leaves nothing behind, so a re-run retries it.
set -euo pipefail

REGISTRY_VERSION=v3.1.2   # github.com/distribution/distribution/v3
TOFU_VERSION=v1.12.6      # github.com/opentofu/opentofu
TERRAFORM_VERSION=v1.5.7  # github.com/hashicorp/terraform
COSIGN_VERSION=v2.6.5     # github.com/sigstore/cosign/v2

dir=${OPROV_TOOLS_DIR:-$HOME/.cache/oprov-tools}
mkdir -p "$dir/bin"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

log() { echo "tools: $*" >&2; }

# build NAME VERSION BINARY PKG@VERSION: go install into a temp dir, then rename into place.
build() {
  local name=$1 version=$2 binary=$3 pkg=$4
  local dest="$dir/$name-$version"
  if [ ! -x "$dest/$binary" ]; then
    log "building $name $version (first run only; cached in $dest)"
    local tmp; tmp=$(mktemp -d "$dir/.tmp-$name-XXXXXX")
    if ! GOBIN="$tmp" go install "$pkg"; then rm -rf "$tmp"; log "building $name failed"; return 1; fi
    chmod 755 "$tmp"; rm -rf "$dest"; mv "$tmp" "$dest"
  fi
  ln -sfn "$dest/$binary" "$dir/bin/$binary"
}

# OpenTofu's go.mod carries a replace directive, which 'go install pkg@version' refuses,
# so build it from a throwaway module that requires it and repeats that replace.
build_tofu() {
  local dest="$dir/tofu-$TOFU_VERSION"
  if [ ! -x "$dest/tofu" ]; then
    log "building tofu $TOFU_VERSION (first run only; cached in $dest)"
    local tmp; tmp=$(mktemp -d "$dir/.tmp-tofu-XXXXXX")
    (
      set -e
      cd "$tmp"
      mkdir src && cd src
      curl -fsSL "$(go env GOPROXY | cut -d, -f1)/github.com/opentofu/opentofu/@v/$TOFU_VERSION.mod" -o upstream.mod
      cat > go.mod <<MOD
module oprov.test/tofubuild
go 1.26
require github.com/opentofu/opentofu $TOFU_VERSION
$(grep '^replace ' upstream.mod)
MOD
      printf 'package tools\nimport _ "github.com/opentofu/opentofu/cmd/tofu"\n' > tools.go
      go mod tidy >/dev/null 2>&1 || true
      go get github.com/opentofu/opentofu/cmd/tofu@$TOFU_VERSION
      go build -o "$tmp/tofu" -ldflags "-X github.com/opentofu/opentofu/version.dev=no" github.com/opentofu/opentofu/cmd/tofu
      cd .. && rm -rf src
    ) || { rm -rf "$tmp"; log "building tofu failed"; return 1; }
    chmod 755 "$tmp"; rm -rf "$dest"; mv "$tmp" "$dest"
  fi
  ln -sfn "$dest/tofu" "$dir/bin/tofu"
}

# Tools named as arguments (tests/tools/install.sh tofu) are the only ones built; none means all.
wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
only="$*"
wanted registry && build registry "$REGISTRY_VERSION" registry "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
wanted cosign && build cosign "$COSIGN_VERSION" cosign "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
wanted tofu && build_tofu
wanted terraform && build terraform "$TERRAFORM_VERSION" terraform "github.com/hashicorp/terraform@$TERRAFORM_VERSION"

echo "$dir/bin"
