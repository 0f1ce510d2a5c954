#!/usr/bin/env bash
# Prints oprov's performance figures against the real peers, side by side in one run, under a
# header that says when, at which commit, with which Go and on which machine they were measured
# (the columns of docs/performance.md).
#
#   tests/bench.sh ROW [ROW...]        the rows named: a benchmark (BenchmarkStartup), or a group
#   tests/bench.sh all                 every benchmark
#   tests/bench.sh --list              the rows, their groups and the peers each needs
#   OPROV_BENCH_MB=20 tests/bench.sh … smaller zips (default 5 platforms x 100 MiB)
#   OPROV_BENCH_COUNT=3 tests/bench.sh … each row that many rounds (default 1)
#
# Only the peers the rows named need are built (tests/tools/install.sh NAME...).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}

# Each benchmark of ./tests and the peers it needs ("-": none; go and curl are assumed).
peers_of() {
  case $1 in
    BenchmarkStartup|BenchmarkSandboxLaunch|BenchmarkLaunch) echo - ;;
    BenchmarkLaunchCheck|BenchmarkLoader|BenchmarkRunPlan) echo registry cosign tofu ;;
    BenchmarkSaveConfigModulesVsTofuInit|BenchmarkSaveConfigVsTofuMirror) echo registry tofu ;;
    BenchmarkServeInit|BenchmarkServeVsStatic|BenchmarkServeFleetRSS) echo registry tofu ;;
    BenchmarkServeRegistryVsStatic) echo registry tofu ;;
    BenchmarkMiddlewareApply|BenchmarkSandboxApply) echo tofu ;;
    BenchmarkCopy|BenchmarkLockBytes|BenchmarkPush5Platforms|BenchmarkSaveLoad) echo registry ;;
    BenchmarkServeArchives|BenchmarkTempSweep) echo registry ;;
    BenchmarkSaveVsRegctl) echo registry regctl ;;
    BenchmarkVerifyVsCosign|BenchmarkInstallRequests) echo registry cosign cosign3 ;;
    BenchmarkKeylessVerifyVsCosign) echo registry cosign3 fulcio tsa rekor ;;
    BenchmarkPythonLaunch|BenchmarkPythonPackagedVsVenv|BenchmarkStdioLaunch) echo python ;;
    BenchmarkPythonRunPlan|BenchmarkStdioApply200) echo python tofu ;;
    BenchmarkRemote) echo registry tofu sshd ;;
    BenchmarkReplay) echo tofu ;;
    *) return 1 ;;
  esac
}

# Groups: several rows measured in one run.
#   launch-path: issue 38's figures (start-up and the sandbox step against a bare Go program,
#   warm run and init against tofu, save --config of modules against tofu init, sizes).
group() {
  case $1 in
    launch-path) echo BenchmarkStartup BenchmarkSandboxLaunch BenchmarkLaunchCheck BenchmarkSaveConfigModulesVsTofuInit ;;
    all) grep -ho '^func Benchmark[A-Za-z0-9_]*' tests/*_test.go | sed 's/^func //' | sort -u ;;
    *) return 1 ;;
  esac
}

if [ $# -eq 0 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
if [ "$1" = --list ]; then
  echo "group launch-path: $(group launch-path)"
  for b in $(group all); do printf '%-40s %s\n' "$b" "$(peers_of "$b" || echo '?')"; done
  exit 0
fi

benches=()
for row in "$@"; do
  if members=$(group "$row"); then
    benches+=($members)
  elif peers_of "$row" >/dev/null; then
    benches+=("$row")
  else
    echo "bench.sh: no row or group named $row (tests/bench.sh --list names them)" >&2
    exit 2
  fi
done

need=()
for b in "${benches[@]}"; do
  for p in $(peers_of "$b" || echo "?$b"); do
    case $p in
      -) ;;
      \?*) echo "bench.sh: ${p#\?} has no entry in peers_of: add one" >&2; exit 2 ;;
      *) [[ " ${need[*]-} " == *" $p "* ]] || need+=("$p") ;;
    esac
  done
done
if [ ${#need[@]} -gt 0 ]; then
  bin=$(bash tests/tools/install.sh "${need[@]}")
  export OPROV_TOOLS_DIR=$(dirname "$bin")
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo 2>/dev/null)
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "commit:  $commit"
echo "go:      $(go env GOVERSION)"
echo "machine: $(nproc) cores (${cpu:-unknown CPU}), ${mem:-? GiB}, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "rows:    ${benches[*]}"

pattern=$(IFS='|'; echo "${benches[*]}")
go test -run '^$' -bench "^($pattern)\$" -benchtime 1x -count "${OPROV_BENCH_COUNT:-1}" -timeout 60m ./tests/
