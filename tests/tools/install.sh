#!/usr/bin/env bash
# Builds the real peers that oprov's end-to-end tests talk to, at pinned versions, from the
# Go module proxy, and caches them outside the repository.
#
#   tests/tools/install.sh          build what is missing, print the bin directory
#   tests/tools/install.sh tofu     only the tools named (registry, cosign, cosign3, fulcio, tsa,
#                                   rekor, tofu, terraform, regctl, goreleaser, syft, python,
#                                   promtool, haproxy, chromium, sshd)
#   OPROV_TOOLS_DIR=/some/dir ...   cache somewhere else (default ~/.cache/oprov-tools)
#
# Each tool lands in $OPROV_TOOLS_DIR/<name>-<version>/ and is linked into
# $OPROV_TOOLS_DIR/bin. A build that fails leaves nothing behind, so a re-run retries it.
set -euo pipefail

REGISTRY_VERSION=v3.1.2   # github.com/distribution/distribution/v3
TOFU_VERSION=v1.12.6      # github.com/opentofu/opentofu
TERRAFORM_VERSION=v1.5.7  # github.com/hashicorp/terraform
COSIGN_VERSION=v2.6.5     # github.com/sigstore/cosign/v2
COSIGN3_VERSION=v3.1.3    # github.com/sigstore/cosign/v3 (linked as cosign3: bundles, signing configs)
FULCIO_VERSION=v1.8.8     # github.com/sigstore/fulcio (keyless tests: an ephemeral CA)
TSA_VERSION=v1.2.9        # github.com/sigstore/timestamp-authority (keyless tests: RFC 3161 time)
REKOR_VERSION=v2.3.0      # github.com/sigstore/rekor-tiles/v2 (keyless tests: a Rekor v2 log, POSIX storage)
REGCTL_VERSION=v0.11.7    # github.com/regclient/regclient (benchmark peer: regctl image export)
SYFT_VERSION=v1.57.1       # github.com/anchore/syft (a release: goreleaser's SBOMs)
GORELEASER_VERSION=v2.15.1 # github.com/goreleaser/goreleaser/v2 (a release; newer needs a newer Go)
TF_PY_VERSION=1.2.0       # PyPI tf: the Python provider SDK (examples/pyhello), in a venv
OLD_PINS="grpcio==1.67.1 protobuf==5.28.3"  # older than tf's newest: the Python pins test pins them
OLD_PINS_MARK=pins-1      # bump when OLD_PINS changes, so a cached wheelhouse is filled again

dir=${OPROV_TOOLS_DIR:-$HOME/.cache/oprov-tools}
mkdir -p "$dir/bin"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

log() { echo "tools: $*" >&2; }

# step NAME WHAT CMD...: says what it is doing for NAME, runs CMD, and on failure says which step
# failed and returns its status. Every build is a chain of steps joined by '|| return': 'set -e'
# cannot be relied on, since bash ignores it inside a function or subshell whose status is tested
# ('f || ...', 'if f', '( ... ) || ...').
step() {
  local name=$1 what=$2; shift 2
  log "$name: $what"
  local rc=0
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then log "$name: FAILED ($what, exit $rc)"; fi
  return "$rc"
}

# build NAME VERSION BINARY PKG@VERSION [LINK]: go install into a temp dir, then rename into
# place; linked into bin as LINK (default BINARY), so two versions of one tool can coexist.
build() {
  local name=$1 version=$2 binary=$3 pkg=$4 link=${5:-$3}
  local dest="$dir/$name-$version"
  if [ ! -x "$dest/$binary" ]; then
    log "building $name $version (first run only; cached in $dest)"
    local tmp; tmp=$(mktemp -d "$dir/.tmp-$name-XXXXXX") || return 1
    if ! step "$name" "go install $pkg" env GOBIN="$tmp" go install "$pkg" || ! settle "$name" "$tmp" "$dest" "$binary"; then
      rm -rf "$tmp"; return 1
    fi
  fi
  ln -sfn "$dest/$binary" "$dir/bin/$link"
}

# settle NAME TMP DEST BINARY: moves a finished build into place, only if it holds BINARY as an
# executable file (so no empty or partial directory can ever be taken for a cached build).
settle() {
  local name=$1 tmp=$2 dest=$3 binary=$4
  if [ ! -f "$tmp/$binary" ] || [ ! -x "$tmp/$binary" ]; then
    log "$name: FAILED (the build left no executable $binary)"; return 1
  fi
  chmod 755 "$tmp" && rm -rf "$dest" && mv "$tmp" "$dest"
}

# OpenTofu's go.mod carries a replace directive, which 'go install pkg@version' refuses,
# so build it from a throwaway module that requires it and repeats that replace.
build_tofu() {
  local dest="$dir/tofu-$TOFU_VERSION"
  if [ ! -x "$dest/tofu" ]; then
    log "building tofu $TOFU_VERSION (first run only; cached in $dest)"
    local tmp; tmp=$(mktemp -d "$dir/.tmp-tofu-XXXXXX") || return 1
    if ! tofu_steps "$tmp" || ! settle tofu "$tmp" "$dest" tofu; then
      rm -rf "$tmp"; log "building tofu $TOFU_VERSION failed (see the step above)"; return 1
    fi
  fi
  ln -sfn "$dest/tofu" "$dir/bin/tofu"
}

# tofu_steps TMP: builds TMP/tofu in TMP/src, one step at a time, stopping at the first failure.
tofu_steps() {
  local tmp=$1 src="$1/src" proxy
  mkdir "$src" || return 1
  proxy=$(go env GOPROXY | cut -d, -f1) || return 1
  step tofu "downloading OpenTofu's go.mod ($TOFU_VERSION)" \
    curl -fsSL "$proxy/github.com/opentofu/opentofu/@v/$TOFU_VERSION.mod" -o "$src/upstream.mod" || return
  local replaces; replaces=$(grep '^replace ' "$src/upstream.mod" || true)
  printf 'module oprov.test/tofubuild\ngo 1.26\nrequire github.com/opentofu/opentofu %s\n%s\n' "$TOFU_VERSION" "$replaces" > "$src/go.mod" || return 1
  printf 'package tools\nimport _ "github.com/opentofu/opentofu/cmd/tofu"\n' > "$src/tools.go" || return 1
  # tidy settles what the import needs; it has been seen to fail on upstream's test-only
  # requirements, which go get below settles in turn, so its failure alone is not fatal.
  (cd "$src" && go mod tidy) >/dev/null 2>&1 || true
  step tofu "go get github.com/opentofu/opentofu/cmd/tofu@$TOFU_VERSION" \
    go -C "$src" get "github.com/opentofu/opentofu/cmd/tofu@$TOFU_VERSION" || return
  step tofu "go build github.com/opentofu/opentofu/cmd/tofu" \
    go -C "$src" build -o "$tmp/tofu" -ldflags "-X github.com/opentofu/opentofu/version.dev=no" github.com/opentofu/opentofu/cmd/tofu || return
  rm -rf "$src"
}

# The Python SDK tf, from PyPI through this machine's pip, in a venv of its own. A venv cannot
# be moved, so it is made in place and counts as done only once its marker file is written; its
# python is bin/tf-python. PIP_CACHE_DIR keeps wheels beside the tools, so the tests'
# own pip runs (packaging pyhello for several CPython versions) reuse them.
install_tf() {
  local dest="$dir/python-tf-$TF_PY_VERSION"
  if [ ! -f "$dest/.complete" ]; then
    log "installing tf $TF_PY_VERSION from PyPI (first run only; cached in $dest)"
    rm -rf "$dest"
    if ! { python3 -m venv "$dest" && PIP_CACHE_DIR="$dir/pip-cache" "$dest/bin/python" -m pip install -q --disable-pip-version-check "tf==$TF_PY_VERSION" >&2; }; then
      rm -rf "$dest"; log "installing tf failed (needs python3 >= 3.11 with venv, and PyPI)"; return 1
    fi
    touch "$dest/.complete"
  fi
  # A wrapper, not a link: a venv's python finds its venv only when called by its own path.
  rm -f "$dir/bin/tf-python"
  printf '#!/bin/sh\nexec "%s/bin/python" "$@"\n' "$dest" > "$dir/bin/tf-python"
  chmod 755 "$dir/bin/tf-python"
}

# A wheelhouse for the Python tests, downloaded from PyPI once: tf's dependencies for each
# platform the tests package pyhello for (linux amd64/arm64, darwin arm64) and each CPython
# version oprov claims, and the build backend. The tests run pip with PIP_NO_INDEX and
# PIP_FIND_LINKS pointing here, so they make no network request and run in seconds. The wheel
# tags are the ones oprov asks pip for (pkg/pybuild/pip.go pipPlatforms).
fill_wheelhouse() {
  local wh="$dir/python-wheels-$TF_PY_VERSION"
  local linux_tags
  linux_tags() { local m; for m in $(seq 28 -1 17); do printf -- '--platform manylinux_2_%s_%s ' "$m" "$1"; done; printf -- '--platform manylinux2014_%s' "$1"; }
  local py plat
  if [ ! -f "$wh/.complete" ]; then
    log "downloading wheels for the Python tests (first run only; cached in $wh)"
    mkdir -p "$wh"
    for py in 3.11 3.12 3.13; do
      for plat in "$(linux_tags x86_64)" "$(linux_tags aarch64)" "--platform macosx_11_0_arm64"; do
        # shellcheck disable=SC2086
        if ! PIP_CACHE_DIR="$dir/pip-cache" python3 -m pip download -q --disable-pip-version-check -d "$wh" --only-binary=:all: \
            --implementation cp --python-version "$py" $plat "tf==$TF_PY_VERSION" >&2; then
          log "downloading wheels failed"; return 1
        fi
      done
    done
    PIP_CACHE_DIR="$dir/pip-cache" python3 -m pip download -q --disable-pip-version-check -d "$wh" "setuptools>=68" wheel >&2 || { log "downloading setuptools failed"; return 1; }
    touch "$wh/.complete"
  fi
  # Older versions than tf's newest, which TestPythonPins pins (CPython 3.12, linux amd64 and
  # arm64): the pins, not the index, must decide what is installed.
  if [ ! -f "$wh/.complete-$OLD_PINS_MARK" ]; then
    log "downloading the older grpcio and protobuf the pins test pins (cached in $wh)"
    for plat in "$(linux_tags x86_64)" "$(linux_tags aarch64)"; do
      # shellcheck disable=SC2086
      if ! PIP_CACHE_DIR="$dir/pip-cache" python3 -m pip download -q --disable-pip-version-check -d "$wh" --only-binary=:all: --no-deps \
          --implementation cp --python-version 3.12 $plat $OLD_PINS >&2; then
        log "downloading wheels failed"; return 1
      fi
    done
    touch "$wh/.complete-$OLD_PINS_MARK"
  fi
}

# Peers from Debian's packages (promtool from prometheus, haproxy, chromium for the serve catalog's
# browser test): installed with apt-get when missing (waiting for another apt-get's lock), as
# root (or through sudo), then linked into the bin directory like the others.
install_deb() {
  local binary=$1 package=$2 path
  path=$(command -v "$binary" || true)
  if [ -z "$path" ]; then
    log "installing $binary from Debian's package $package"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    local apt=($sudo apt-get -o DPkg::Lock::Timeout=600)
    if ! { "${apt[@]}" install -y -q --no-install-recommends "$package" >&2 \
        || { "${apt[@]}" update -q >&2 && "${apt[@]}" install -y -q --no-install-recommends "$package" >&2; }; }; then
      log "installing $package failed (needs root or sudo, and apt)"; return 1
    fi
    path=$(command -v "$binary") || { log "$package installed no $binary"; return 1; }
  fi
  ln -sfn "$path" "$dir/bin/$binary"
}

# Tools named as arguments (tests/tools/install.sh tofu) are the only ones built; none means all.
wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
only="$*"
wanted registry && build registry "$REGISTRY_VERSION" registry "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
wanted cosign && build cosign "$COSIGN_VERSION" cosign "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
wanted cosign3 && build cosign3 "$COSIGN3_VERSION" cosign "github.com/sigstore/cosign/v3/cmd/cosign@$COSIGN3_VERSION" cosign3
# Fulcio's go.mod needs -mod=mod to build as 'go install pkg@version'.
wanted fulcio && GOFLAGS="-buildvcs=false -mod=mod" build fulcio "$FULCIO_VERSION" fulcio "github.com/sigstore/fulcio@$FULCIO_VERSION"
wanted rekor && build rekor "$REKOR_VERSION" posix "github.com/sigstore/rekor-tiles/v2/cmd/rekor-server/posix@$REKOR_VERSION" rekor-server
wanted tsa && build tsa "$TSA_VERSION" timestamp-server "github.com/sigstore/timestamp-authority/cmd/timestamp-server@$TSA_VERSION"
wanted tofu && build_tofu
wanted regctl && build regctl "$REGCTL_VERSION" regctl "github.com/regclient/regclient/cmd/regctl@$REGCTL_VERSION"
# goreleaser and syft make a release (docs/development.md); the tests run it as a snapshot.
wanted syft && build syft "$SYFT_VERSION" syft "github.com/anchore/syft/cmd/syft@$SYFT_VERSION"
wanted goreleaser && build goreleaser "$GORELEASER_VERSION" goreleaser "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
wanted terraform && build terraform "$TERRAFORM_VERSION" terraform "github.com/hashicorp/terraform@$TERRAFORM_VERSION"
wanted python && install_tf
wanted python && fill_wheelhouse
wanted promtool && install_deb promtool prometheus
wanted haproxy && install_deb haproxy haproxy
wanted chromium && install_deb chromium chromium
# OpenSSH (Debian's openssh-server, with its client): the remote provider tests start sshd on
# 127.0.0.1 with a throwaway host key and a user of their own.
wanted sshd && install_deb sshd openssh-server && install_deb ssh openssh-client

echo "$dir/bin"
