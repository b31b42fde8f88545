#!/usr/bin/env bash
# The benchmark (docs/performance.md): on its own local cluster (ATO_CLUSTER=ato-bench), the
# Ansible floor, this operator run as `make run` runs it, and training-operator, one after the
# other; results (JSON, markdown, plots) in results/bench/<UTC time>/ unless --out is given.
#
#   hack/bench.sh [--profile full|tfjob|scale|outage|restarts|kueue|smoke] [--targets floor,ours,upstream] [--scenarios KIND,mixed]
#                  [--concurrency N] [--out DIR] [--keep-cluster]
#
# Settings read from the environment: MAX_CONCURRENT_RECONCILES, JOB_POLL_SECONDS, JOB_WAKE.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"

keep=false
args=()
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --keep-cluster) keep=true ;;
    --out) out=$2; args+=(--out "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ -z "$out" ]; then
  out="$root/results/bench/$(date -u +%Y%m%dT%H%M%SZ)"
  args+=(--out "$out")
fi

# An operator already running on this machine holds the runtime's fixed ports (8888, 5050).
if (exec 3<>/dev/tcp/127.0.0.1/6789) 2>/dev/null; then
  log "an operator is already running here (127.0.0.1:6789): stop it first"; exit 1
fi
targets=$(printf '%s\n' "${args[@]}" | sed -n '/^--targets$/{n;p}')
profile=$(printf '%s\n' "${args[@]}" | sed -n '/^--profile$/{n;p}')
if [ "$profile" != scale ] && [ "$profile" != restarts ] && [ "$profile" != kueue ] && { [ -z "$targets" ] || [[ $targets == *upstream* ]]; }; then
  "$root/hack/build-go-tools.sh" training-operator
fi

# The plotting stack is the benchmark's own (requirements-bench.txt), installed on first use.
stamp="$root/.venv/.bench-installed"
if [ ! -e "$stamp" ] || [ "$root/requirements-bench.txt" -nt "$stamp" ]; then
  "$root/.venv/bin/pip" install --quiet -r "$root/requirements-bench.txt" -c "$root/requirements.txt"
  touch "$stamp"
fi

export ATO_CLUSTER=ato-bench
unset KUBECONFIG OPERATOR_KUBECONFIG
if ! $keep; then trap '"$root/hack/cluster.sh" down' EXIT; fi
KUBECONFIG=$("$root/hack/cluster.sh" up)
export KUBECONFIG
# Five replicas per job and up to 100 jobs at once: more fake nodes than the test cluster has.
kubectl apply -f "$root/hack/bench/nodes.yaml" >&2
kubectl wait --for=condition=Ready node --all --timeout=120s >/dev/null
install_apis
export PATH="$root/.venv/bin:$root/bin:$PATH"
"$root/.venv/bin/python" "$root/hack/bench/bench.py" "${args[@]}"
"$root/.venv/bin/python" "$root/hack/bench/report.py" "$out"
