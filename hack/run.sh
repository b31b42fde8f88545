#!/usr/bin/env bash
# The operator-sdk local run: the ansible-operator runtime in the foreground, on this machine,
# against the cluster in KUBECONFIG (the local cluster is started when none is configured).
# Ctrl-C (SIGINT) or SIGTERM stops it; the runtime's own Ansible children are stopped with it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
# The local cluster (no KUBECONFIG given) is made whole for TrainJobs too: JobSet's manager beside
# it (hack/jobset.sh: built on first use, started once, left running like the cluster; stopped by
# `make cluster-down`). RUN_JOBSET=false leaves it out. A cluster of your own brings its JobSet.
local_cluster=false
[ -n "${KUBECONFIG:-}" ] || local_cluster=true
use_cluster
install_apis
if $local_cluster && [ "${RUN_JOBSET:-true}" != false ]; then
  "$root/hack/jobset.sh" up
fi
# The APIs are installed with the caller's identity; the operator and its companion may run as
# another one (hack/test.sh: the operator's own ServiceAccount, see operator_identity).
if [ -n "${OPERATOR_KUBECONFIG:-}" ]; then
  export KUBECONFIG=$OPERATOR_KUBECONFIG
fi
# The runtime points its Ansible runs' KUBECONFIG at its caching proxy; a pass whose cached pods
# lag the companion's wake reads them once more from the API server, with this one
# (Client.past_proxy in lib/training_kube/client.py). In a pod the ServiceAccount serves.
export TRAINING_API_KUBECONFIG=$KUBECONFIG

export ANSIBLE_CONFIG="$root/ansible.cfg"
export ANSIBLE_ROLES_PATH="$root/roles" \
  ANSIBLE_ACTION_PLUGINS="$root/action_plugins" ANSIBLE_FILTER_PLUGINS="$root/filter_plugins"
export ANSIBLE_GATHERING=explicit
# The runtime writes one INI inventory per run (inventory/hosts): only the ini plugin is tried,
# not host_list, script, auto, yaml and toml before it (docs/performance.md). As in the image.
export ANSIBLE_INVENTORY_ENABLED=ini
# ansible-runner and its event plugin come from the project venv.
export VIRTUAL_ENV="$root/.venv" PATH="$root/.venv/bin:$root/bin:$PATH"
cd "$root"
log "operator $(bin/ansible-operator version | head -1) on $(kubectl config current-context 2>/dev/null || echo "$KUBECONFIG")"
# The companion (lib/training_companion): job counters and the wake watcher, which the operator
# pod runs as a sidecar; it stops by itself once this process (the operator, after exec) is gone.
# Jobs are not polled, so the companion must run: like the kubelet restarts the sidecar, this
# loop restarts it if it dies, and its first list wakes every job whose pods changed meanwhile.
# JOB_WAKE=false leaves job updates to polling alone: set JOB_POLL_SECONDS (e.g. 3) then.
export JOB_METRICS_BIND=${JOB_METRICS_BIND:-127.0.0.1:8686}
export JOB_METRICS_URL="http://$JOB_METRICS_BIND/observe"
companion=(--bind "$JOB_METRICS_BIND" --exit-with-pid $$)
[ "${JOB_WAKE:-true}" = true ] || companion+=(--no-wake)
operator=$$
(
  trap 'exit 0' INT TERM
  while kill -0 "$operator" 2>/dev/null; do
    PYTHONPATH="$root/lib" python3 -m training_companion "${companion[@]}" || true
    kill -0 "$operator" 2>/dev/null || break
    log "the companion stopped; starting it again"
    sleep 1
  done
) &
# The Ansible zygote (lib/ansible_zygote, docs/architecture.md): the runtime and ansible-runner
# find its client first on PATH as ansible-runner and ansible-playbook, and a warm, pre-imported
# Ansible forks each run instead of two interpreters starting from nothing. Its server is a child
# of the operator like the companion (so its CPU and memory count as the operator's), restarted
# if it dies. ANSIBLE_ZYGOTE=false runs the real programs directly.
if [ "${ANSIBLE_ZYGOTE:-true}" != false ]; then
  # One socket per operator, in a directory of its own (mode 0700: no other user can bind, replace
  # or remove it; lib/ansible_zygote/socket_dir.py), under /tmp when TMPDIR is too long for a
  # socket path. The server removes the socket as the first step of its stop (Ctrl-C reaches it
  # directly; the supervising loop ends once the operator is gone). A killed operator (SIGKILL)
  # leaves its socket: those nothing listens on go, those of another user stay.
  if ANSIBLE_ZYGOTE_SOCKET=$(PYTHONPATH="$root/lib" python3 -m ansible_zygote.socket_dir "${TMPDIR:-/tmp}"); then
    export ANSIBLE_ZYGOTE_SOCKET PATH="$root/lib/ansible_zygote/bin:$PATH"
    # Its runs served so far: python3 -m ansible_zygote.server --socket PATH --stats
    log "the Ansible zygote's socket: $ANSIBLE_ZYGOTE_SOCKET"
    (trap '' INT; exec "$root/lib/ansible_zygote/supervise.sh" "$operator" "$ANSIBLE_ZYGOTE_SOCKET") &
  else
    log "no directory for the Ansible zygote's socket: the real ansible-runner runs"
  fi
fi
# The runtime keeps each job's ansible-runner directory in /tmp/ansible-operator/runner/<group>/
# <version>/<kind>/<namespace>/<name>. An operator stopped in the middle of a pass can leave the
# job's artifacts/latest link pointing at a run directory never created; ansible-runner's
# artifact rotation then crashes on it in that job's next pass, and the runtime marks the job with
# a Failure condition that is not Kubeflow's (docs/troubleshooting.md). The directory is shared by
# every operator on this machine, so only such dangling links go (they break anyone's next pass):
# removing the directory, or a valid link, could fail a pass of an operator still running.
for link in /tmp/ansible-operator/runner/*/*/*/*/*/artifacts/latest; do
  # Another user's link stays (it is theirs to remove): set -e must not stop the run for it.
  if [ -L "$link" ] && [ ! -e "$link" ]; then rm -f "$link" 2>/dev/null || true; fi
done
# --ansible-verbosity=0: the runtime's default (2) runs ansible-runner with -vv, which doubles a
# pass's events and has the callback print every task's result (the observed objects included):
# about a tenth of a reconcile's CPU (docs/performance.md). A failing task's result is printed at
# any verbosity; ANSIBLE_VERBOSITY_<KIND>_<GROUP> (e.g. ANSIBLE_VERBOSITY_TFJOB_KUBEFLOW_ORG=2)
# or a job's ansible.sdk.operatorframework.io/verbosity annotation raises it (troubleshooting.md).
exec bin/ansible-operator run \
  --watches-file="$root/watches.yaml" \
  --ansible-roles-path="$root/roles" \
  --reconcile-period="${RECONCILE_PERIOD:-0s}" \
  --max-concurrent-reconciles="${MAX_CONCURRENT_RECONCILES:-2}" \
  --metrics-bind-address="${METRICS_BIND_ADDRESS:-127.0.0.1:8443}" \
  --health-probe-bind-address="${HEALTH_PROBE_BIND_ADDRESS:-127.0.0.1:6789}" \
  --ansible-log-events="${ANSIBLE_LOG_EVENTS:-Tasks}" \
  --ansible-verbosity=0 \
  --zap-log-level="${LOG_LEVEL:-info}" \
  "$@"
