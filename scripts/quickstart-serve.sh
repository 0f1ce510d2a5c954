#!/usr/bin/env bash
# The quickstart's default path, after the push: serve the OCI layout with `oprov serve` and
# have tofu install examples/hello through network_mirror and apply a configuration.
#
#   scripts/quickstart-serve.sh OPROV LAYOUT_DIR
set -euo pipefail
oprov=$1 layout=$2
qs=quickstart

tofu=${OPROV_TOFU:-$(command -v tofu || true)}
if [ -z "$tofu" ]; then
  echo "== no tofu on PATH: building OpenTofu (pinned, first run only) with tests/tools/install.sh"
  tofu="$(bash tests/tools/install.sh tofu)/tofu"
fi

echo "== serving $layout as a network mirror"
rm -f "$qs/serve.out"
"$oprov" serve "oci-layout:$layout" --address example.com/acme/hello --listen 127.0.0.1:0 \
  --state-dir "$qs/state" --cache-dir "$qs/cache" > "$qs/serve.out" 2> "$qs/serve.log" &
serve_pid=$!
trap 'kill -TERM $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q '^}$' "$qs/serve.out" 2>/dev/null && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$qs/serve.log" >&2; exit 1; }
  sleep 0.1
done
cat "$qs/serve.out"
sed -n '/^provider_installation/,$p' "$qs/serve.out" > "$qs/mirror.tfrc"

echo "== tofu providers lock, init and apply through network_mirror (access log: $qs/serve.log)"
mkdir -p "$qs/config"
cat > "$qs/config/main.tf" <<'TF'
terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

provider "hello" {
  greeting = "Hello"
}

resource "hello_greeting" "world" {
  name = "oprov"
}

output "message" {
  value = hello_greeting.world.message
}
TF
export TF_CLI_CONFIG_FILE=$PWD/$qs/mirror.tfrc SSL_CERT_FILE=$PWD/$qs/state/ca.pem TF_IN_AUTOMATION=1
url=$(sed -n 's/^Serving .* at \(https:[^ ]*\)$/\1/p' "$qs/serve.out")
cd "$qs/config"
# Lock every platform the release has through the mirror (tofu init alone locks only this one).
"$tofu" providers lock -net-mirror="$url" -platform=linux_amd64 -platform=linux_arm64 \
  -platform=darwin_arm64 -platform=windows_amd64 example.com/acme/hello
"$tofu" init -input=false
"$tofu" apply -auto-approve -input=false
