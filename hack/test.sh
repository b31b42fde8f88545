#!/usr/bin/env bash
# The project's test stages; `make test` runs them all (CI calls `make test`).
#
#   hack/test.sh lint    ansible-lint (production profile), yamllint, ruff, hadolint, mypy, shellcheck,
#                        generated files up to date
#   hack/test.sh unit    pure pytest of filters and plugins (no cluster), and the zygote's proof
#                        that it runs the same Ansible (tests/zygote: real programs against it)
#   hack/test.sh e2e     on the cluster in KUBECONFIG (the local one if unset): the operator is
#                        started in the background, then pytest's cluster and harness tests and
#                        the molecule scenario run against it; the operator is stopped after.
#                        Later steps run operators of their own: restarts, the swap, gang
#                        scheduling (Volcano, scheduler-plugins), Kueue (hack/kueue.sh), namespaces.
#   hack/test.sh zygote-off  a representative part of the cluster tests with the operator run as
#                        ANSIBLE_ZYGOTE=false (every other stage runs it with the zygote, the default)
#   hack/test.sh real-node  the real node's stage alone (e2e runs it last): hack/real-node.sh up,
#                        JobSet (hack/jobset.sh up), the operator, pytest -m real_node tests/cluster
#                        tests/node (the cluster tests' real variants and the node's own tests, a
#                        TrainJob through the SDK among them), then with that operator stopped the
#                        operator's Deployment on the node (hack/real-node-operator.sh, pytest -m
#                        real_node_deployment tests/node), then OLM's install and upgrade with
#                        the CSV's pod on the node (pytest -m olm_real_node tests/node, which runs
#                        hack/olm-test.sh with OLM_REAL_NODE=true), JobSet down, hack/real-node.sh
#                        down (which fails if the machine changed). OPERATOR_NETNS=true runs the
#                        operator of any stage in a network namespace of its own.
#   hack/test.sh olm     the bundle, installed and upgraded through OLM (local olm, catalog and opm
#                        serve) on the cluster in KUBECONFIG (the local one if unset), its pod on
#                        a KWOK node (the real-node stage runs it on the real node)
#   hack/test.sh bench   the benchmark's smoke profile on its own cluster (hack/bench.sh)
#   hack/test.sh all     lint, unit, e2e (with bench beside its real-node stage's second half:
#                        see start_bench_beside), zygote-off (the Go tools build in the
#                        background from the start: see build_cluster_tools)
#
# Pass or fail, a run leaves nothing behind: the operators it started are stopped, and the local
# cluster it started is deleted (on a cluster it found running, or the one in KUBECONFIG, the
# namespaces it created are). KEEP_TEST_STATE=true keeps all of it for debugging.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
cd "$root"
export PATH="$root/.venv/bin:$PATH" VIRTUAL_ENV="$root/.venv"
artifacts="$root/.local/test"
mkdir -p "$artifacts"

lint() {
  log "ruff"
  ruff check .
  ruff format --check .
  log "yamllint"
  yamllint --strict .
  log "ansible-lint (production profile)"
  ANSIBLE_CONFIG="$root/ansible.cfg" ansible-lint --profile production --offline
  log "hadolint"
  hadolint Dockerfile
  log "mypy (lib/, hack/gen_crds)"
  mypy
  log "shellcheck"
  shellcheck -x -P SCRIPTDIR --severity=warning hack/*.sh hack/real-node/*.sh lib/ansible_zygote/supervise.sh .ci/run
  log "generated CRDs are up to date"
  python hack/gen_crds --check
}

unit() {
  log "unit tests"
  pytest -q tests/unit
  log "the zygote runs the same Ansible (tests/zygote: real ansible-runner against the zygote)"
  pytest -q tests/zygote -p no:cacheprovider
}

operator_pid=""
operator_kubeconfig=""
operator_relay_pid=""
start_operator() {
  local logfile=${1:-$artifacts/operator.log}
  log "starting the operator (log: $logfile)"
  # OPERATOR_NETNS=true: in a network namespace of its own, as the second operator below, so that
  # its fixed ports cannot clash with another operator's on a shared machine.
  if [ "${OPERATOR_NETNS:-false}" = true ]; then
    local rc=0
    start_in_netns "$logfile" operator || rc=$?
    operator_pid=$netns_pid operator_relay_pid=$netns_relay_pid
    return "$rc"
  fi
  # Its own process group, so stopping it stops every Ansible run it started.
  # Only the e2e operators run as the operator's identity (not the benchmark's, on its own cluster).
  OPERATOR_KUBECONFIG=${operator_kubeconfig:-} setsid hack/run.sh >"$logfile" 2>&1 &
  operator_pid=$!
  # The operator's own health endpoint, on loopback.
  local readyz="http://127.0.0.1:${HEALTH_PORT:-6789}/readyz"
  for _ in $(seq 120); do
    if curl -fsS "$readyz" >/dev/null 2>&1; then return; fi
    kill -0 "$operator_pid" 2>/dev/null || { tail -50 "$logfile"; return 1; }
    sleep 1
  done
  log "operator did not become ready"; tail -50 "$logfile"; return 1
}

# stop_group PID: stop the process group PID leads (an operator and every Ansible run it started).
stop_group() {
  kill -INT -- "-$1" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$1" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$1" 2>/dev/null || true
}

stop_operator() {
  [ -n "$operator_pid" ] || return 0
  stop_group "$operator_pid"
  [ -z "$operator_relay_pid" ] || kill "$operator_relay_pid" 2>/dev/null || true
  operator_pid="" operator_relay_pid=""
}

# A second operator beside the first, on namespaces of its own: a cluster sharded across
# deployments (docs/performance.md). Its ports are fixed as the first one's are, so it runs in a
# network namespace of its own and reaches the API server through a relay (hack/netns/).
shard_relay_pid="" shard_pid=""
start_shard_operator() {
  log "starting a second operator in its own network namespace (log: $1)"
  local rc=0
  start_in_netns "$1" shard || rc=$?
  shard_pid=$netns_pid shard_relay_pid=$netns_relay_pid
  return "$rc"
}

# start_in_netns LOGFILE NAME: hack/run.sh in a network namespace of its own, reaching the API
# server through a relay; sets netns_pid (the operator's process group) and netns_relay_pid.
netns_pid="" netns_relay_pid=""
start_in_netns() {
  local logfile=$1 socket="$artifacts/$2-api.sock" api netns=()
  api=$(loopback_api) && private_netns || return 1
  rm -f "$socket"
  setsid python3 hack/netns/relay.py unix-to-tcp "$socket" "$api" 2>"$artifacts/$2-relay.log" &
  netns_relay_pid=$!
  for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
  OPERATOR_KUBECONFIG=$operator_kubeconfig setsid "${netns[@]}" -- \
    hack/netns/in-netns.sh "$api" "$socket" hack/run.sh >"$logfile" 2>&1 &
  netns_pid=$!
  # Its health endpoint is on its own loopback: it is ready once its TFJob workers run.
  for _ in $(seq 120); do
    grep -q '"msg":"Starting workers","controller":"tfjob-v1-controller"' "$logfile" && return
    kill -0 "$netns_pid" 2>/dev/null || { tail -50 "$logfile"; return 1; }
    sleep 1
  done
  log "the operator in its own network namespace did not become ready"; tail -50 "$logfile"; return 1
}

stop_shard_operator() {
  [ -z "$shard_pid" ] || stop_group "$shard_pid"
  # A background job ignores SIGINT (no job control here): the relay gets SIGTERM.
  [ -z "$shard_relay_pid" ] || kill "$shard_relay_pid" 2>/dev/null || true
  shard_pid="" shard_relay_pid=""
}

e2e() {
  test_cluster
  install_apis
  # The operator authenticates as its own ServiceAccount with the deployment's rules only.
  log "the operator's identity: ServiceAccount ato-e2e-operator/operator, config/rbac/role.yaml"
  operator_identity ato-e2e-operator "$artifacts/operator.kubeconfig"
  operator_kubeconfig="$artifacts/operator.kubeconfig"
  start_operator
  export OPERATOR_LOG="$artifacts/operator.log"
  # Upstream's test tables (own namespace, about 8 min) run beside the other cluster tests.
  local replay_log="$artifacts/upstream-replay.log" replay_pid failed=0
  log "upstream's test tables, replayed (in the background; log: $replay_log)"
  pytest -q -m cluster tests/cluster/test_upstream_replay.py -p no:cacheprovider >"$replay_log" 2>&1 &
  replay_pid=$!
  log "cluster and harness tests"
  pytest -q --durations=10 -m cluster tests/cluster tests/harness --ignore=tests/cluster/test_upstream_replay.py \
    -p no:cacheprovider || failed=1
  wait "$replay_pid" || { log "upstream replay failed:"; tail -80 "$replay_log"; failed=1; }
  log "upstream replay: $(tail -1 "$replay_log")"
  [ "$failed" = 0 ] || return 1
  log "molecule (scenario: default)"
  (cd "$root" && molecule test -s default) || {
    log "molecule failed; operator log tail:"; tail -80 "$artifacts/operator.log"; return 1
  }
  zygote_served "$artifacts/operator.log"
  stop_operator
  # An operator stopped in the middle of a pass (SIGINT as make run's Ctrl-C, SIGKILL as a killed
  # container) and started again, and the whole control plane restarted under a running one:
  # the tests start and stop their own operator, so none other may run.
  # They run it as make run does by default, as the caller (tests/restart says why).
  log "restart tests (operators of their own; logs: $artifacts/operator-restart-*.log)"
  RESTART_LOG_DIR=$artifacts pytest -q -m restarts tests/restart -p no:cacheprovider || {
    log "restart tests failed; operator log tails:"
    for f in "$artifacts"/operator-restart-*.log; do tail -40 "$f"; done; return 1
  }
  # training-operator v1.9.4 replaced by this operator with jobs in flight, and back, by the
  # documented procedure (hack/swap-training-operator.sh): the test runs both operators itself.
  await_prebuilt training-operator
  log "swap tests (training-operator and this operator; logs: $artifacts/swap/)"
  pytest -q -m swap_training_operator tests/swap -p no:cacheprovider || {
    log "swap tests failed; operator log tails:"
    for f in "$artifacts"/swap/*operator-[0-9]*.log; do tail -40 "$f"; done; return 1
  }
  # Gang scheduling is an operator-level setting: a second run of the operator, with Volcano's
  # real scheduler beside it (hack/gang-schedulers.sh; built on first use, logs in .local/gang/).
  # TrainJobs are ganged too (tests/gang/test_trainjob_gangs.py: their runtime's podGroupPolicy
  # decides, not the setting), on JobSet, which starts here and runs on through the Kueue and
  # TrainJob stages (their hack/jobset.sh up finds it running); stop_jobset stops it after them.
  log "gang scheduling tests (Volcano's vc-scheduler, operator with GANG_SCHEDULER_NAME=volcano; JobSet)"
  gang_schedulers=volcano
  await_prebuilt jobset volcano
  jobset_started=true
  hack/jobset.sh up
  hack/gang-schedulers.sh volcano up
  # The poll of a gang waiting for admission is out of the tests' reach (an hour): each step of
  # Volcano's admission must reach its job through the runtime's watch on the PodGroup.
  GANG_SCHEDULER_NAME=volcano GANG_POLL_SECONDS=3600 start_operator "$artifacts/operator-gang.log"
  pytest -q -m gang tests/gang -p no:cacheprovider || {
    log "gang tests failed; operator, vc-scheduler and JobSet log tails:"
    tail -80 "$artifacts/operator-gang.log"; tail -40 .local/gang/volcano.log
    tail -20 ".local/jobset/${ATO_CLUSTER:-ato}/jobset.log"; return 1
  }
  stop_operator
  hack/gang-schedulers.sh volcano down
  log "gang scheduling tests (scheduler-plugins, operator with GANG_SCHEDULER_NAME=scheduler-plugins-scheduler)"
  gang_schedulers=plugins
  await_prebuilt scheduler-plugins
  hack/gang-schedulers.sh plugins up
  GANG_SCHEDULER_NAME=scheduler-plugins-scheduler start_operator "$artifacts/operator-gang-plugins.log"
  pytest -q -m gang_plugins tests/gang -p no:cacheprovider || {
    log "scheduler-plugins tests failed; operator, scheduler and JobSet log tails:"
    tail -80 "$artifacts/operator-gang-plugins.log"; tail -40 .local/gang/scheduler-plugins-scheduler.log
    tail -20 ".local/jobset/${ATO_CLUSTER:-ato}/jobset.log"; return 1
  }
  stop_operator
  hack/gang-schedulers.sh plugins down
  gang_schedulers=""
  kueue_tests
  trainer_tests
  # OLM's OwnNamespace (the identity's namespace) and a namespace list, in one run, and a second
  # operator on another namespace beside it.
  log "the operator with WATCH_NAMESPACE=ato-e2e-operator,ato-watched; a second one with ato-shard-b"
  for ns in ato-watched ato-shard-b; do
    kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  done
  WATCH_NAMESPACE=ato-e2e-operator,ato-watched start_operator "$artifacts/operator-namespaces.log"
  WATCH_NAMESPACE=ato-shard-b start_shard_operator "$artifacts/operator-shard-b.log"
  OPERATOR_LOG="$artifacts/operator-namespaces.log" SHARD_OPERATOR_LOG="$artifacts/operator-shard-b.log" \
    pytest -q -m watch_namespace tests/namespaces -p no:cacheprovider || {
    log "WATCH_NAMESPACE tests failed; operator log tails:"
    tail -60 "$artifacts/operator-namespaces.log"; tail -60 "$artifacts/operator-shard-b.log"; return 1
  }
  stop_shard_operator
  stop_operator
  kubectl delete namespace ato-watched ato-shard-b --wait=false >/dev/null
  real_node_tests
  # Ctrl-C semantics of `make run`: nothing of the operator may survive its stop, its Ansible
  # zygote (server, templates, their children) included.
  if pgrep -f "$root/watches.yaml|$root/lib/ansible_zygote/" >/dev/null; then
    log "operator processes survived the stop:"; pgrep -af "$root/watches.yaml|$root/lib/ansible_zygote/"; return 1
  fi
  # The zygote is on by default: the runs above were served by its templates.
  grep -q "ansible-zygote: template pid [0-9]* ready" "$artifacts/operator.log" || {
    log "the operator's Ansible zygote never had a warm template (operator.log)"; return 1
  }
}

# zygote_served LOG: the zygote is on by default, and the passes of the operator whose log is LOG
# were served by its templates: its server's counts, read before the operator stops (they start
# again with the server), against the passes in the log. A pass whose template was still warming,
# or retired, falls back to the real programs: most are served, or the zygote is not doing its job.
zygote_served() {
  local socket stats passes
  socket=$(sed -n "s/.*the Ansible zygote's socket: //p" "$1" | tail -1)
  stats=$(PYTHONPATH="$root/lib" python3 -m ansible_zygote.server --socket "$socket" --stats) || {
    log "the Ansible zygote's server does not answer (socket: ${socket:-none in $1})"; return 1
  }
  # The runtime's line for a pass's first task (its stdout repeats the task's name).
  passes=$(grep -c '"msg":"\[playbook task start\]".*Read the objects the job owns' "$1" || true)
  log "the Ansible zygote served $stats; the operator's passes: $passes"
  python3 -c '
import json, sys
served, passes = json.loads(sys.argv[1])["served"], int(sys.argv[2])
sys.exit(0 if passes and min(served.values()) * 2 >= passes else 1)' "$stats" "$passes" || {
    log "the zygote served fewer than half of the passes"; return 1
  }
}

# The zygote off (ANSIBLE_ZYGOTE=false): the real ansible-runner and ansible-playbook on every
# run. What only it shows: every kind's role run by the real programs, the job counters, the wake
# around slower passes, and the paths where the runtime reads the real programs' events and exit
# (a requeue: restarts, the deadline, the TTL; an edit: suspend; a force delete: a lost node). The
# engine's rules are the same whichever program runs them: the rest runs with the zygote on (e2e),
# and tests/zygote compares the two programs' event streams and output.
ZYGOTE_OFF_TESTS="test_training_operator_kinds or test_metrics or test_wake_race or (restart_matrix and ExitCode)
  or active_deadline or ttl_deletes or suspend_and_resume or finished_pod_wakes or job_recovers"
zygote_off() {
  test_cluster
  install_apis
  operator_identity ato-e2e-operator "$artifacts/operator.kubeconfig"
  operator_kubeconfig="$artifacts/operator.kubeconfig"
  local logfile="$artifacts/operator-zygote-off.log"
  log "cluster tests with the operator run as ANSIBLE_ZYGOTE=false (log: $logfile)"
  # Its slower passes widen the window in which a pod changes during a pass (issue 37): with the
  # companion's periodic list at an hour, only a wake can bring such a job on.
  WAKE_RESYNC_SECONDS=3600 ANSIBLE_ZYGOTE=false start_operator "$logfile"
  OPERATOR_LOG=$logfile pytest -q --durations=10 -m cluster tests/cluster/test_lifecycle.py \
    tests/cluster/test_training_operator_kinds.py tests/cluster/test_metrics.py \
    tests/cluster/test_wake_race.py -k "${ZYGOTE_OFF_TESTS//$'\n'/ }" -p no:cacheprovider || {
    log "cluster tests with the zygote off failed; operator log tail:"; tail -80 "$logfile"; return 1
  }
  stop_operator
  if grep -q "ansible-zygote:" "$logfile"; then
    log "ANSIBLE_ZYGOTE=false still started the zygote:"; grep "ansible-zygote:" "$logfile"; return 1
  fi
}

# The real node (hack/real-node.sh, docs/real-node.md): real containers under a real kubelet
# beside the KWOK nodes, with the operator as in the other stages, and JobSet (hack/jobset.sh) for
# the TrainJob that trains there through the Kubeflow SDK (tests/node/test_sdk_real_node.py); then
# the operator's own Deployment on the node (real_node_deployment_tests), then OLM's install and
# upgrade of it there (olm_real_node_tests). The stage starts the node and JobSet and stops them
# after; `down` fails the stage if the machine is not as the node found it.
real_node_started=false real_node_deployed=false
real_node_tests() {
  log "real node tests (hack/real-node.sh; node logs: .local/real-node/)"
  await_prebuilt real-node jobset
  real_node_started=true
  hack/real-node.sh up >/dev/null
  jobset_started=true
  hack/jobset.sh up
  start_operator "$artifacts/operator-real-node.log"
  local failed=0
  # The cluster tests that take `node` run their real variants here (the cluster stage leaves them
  # out: tests/cluster/conftest.py); tests/node is the node's own.
  pytest -q -m real_node tests/cluster tests/node -p no:cacheprovider || failed=1
  stop_operator
  start_bench_beside
  real_node_deployment_tests || failed=1
  olm_real_node_tests || failed=1
  await_bench || failed=1
  stop_jobset
  real_node_started=false
  hack/real-node.sh down || failed=1
  [ "$failed" = 0 ] || {
    log "real node tests failed; operator log tail:"; tail -60 "$artifacts/operator-real-node.log"; return 1
  }
}

# The operator as users install it (issue 38 §2): its image assembled here, its Deployment on the
# real node through `make deploy`'s path (hack/real-node-operator.sh), and no other operator
# running: every pass the tests see is the container's. Its containers' logs go to the artifacts.
real_node_deployment_tests() {
  log "the operator's Deployment on the real node (hack/real-node-operator.sh; log: $artifacts/operator-deployment.log)"
  await_prebuilt operator-image
  local failed=0 pod
  real_node_deployed=true
  hack/real-node-operator.sh up >"$artifacts/operator-deployment-up.log" 2>&1 || {
    failed=1; tail -40 "$artifacts/operator-deployment-up.log"
  }
  [ "$failed" = 1 ] || pytest -q -m real_node_deployment tests/node -p no:cacheprovider || failed=1
  for pod in $(kubectl get pods -n ansible-training-operator-system -o name 2>/dev/null); do
    kubectl logs -n ansible-training-operator-system "$pod" --all-containers --prefix >>"$artifacts/operator-deployment.log" 2>&1 || true
  done
  hack/real-node-operator.sh down >/dev/null 2>&1 || failed=1
  real_node_deployed=false
  [ "$failed" = 0 ] || { log "the Deployment's tests failed; its log tail:"; tail -60 "$artifacts/operator-deployment.log"; }
  return "$failed"
}

# OLM installs the bundle with the CSV's Deployment on the real node, and upgrades it with jobs
# of four kinds in flight (issue 38 §3): tests/node/test_olm_real_node.py runs hack/olm-test.sh
# (OLM_REAL_NODE=true) and checks the jobs between its steps. After the Deployment's tests, with
# that one undeployed: the CSV's operator must be the only one.
olm_real_node_tests() {
  log "OLM installs and upgrades the operator on the real node (log: $artifacts/olm-real-node.log)"
  await_prebuilt olm operator-image
  pytest -q -m olm_real_node tests/node -p no:cacheprovider || {
    log "OLM's test on the real node failed; its log tail:"; tail -60 "$artifacts/olm-real-node.log"; return 1
  }
}

# The real node's stage alone (e2e runs it too).
real_node() {
  test_cluster
  install_apis
  operator_identity ato-e2e-operator "$artifacts/operator.kubeconfig"
  operator_kubeconfig="$artifacts/operator.kubeconfig"
  real_node_tests
}

olm() {
  await_prebuilt olm
  test_cluster
  install_apis
  log "OLM install test"
  hack/olm-test.sh
}

bench() {
  # The benchmark's smoke profile on its own cluster: every measurement path, and every job of
  # every burst must finish (bench.py fails otherwise).
  log "benchmark smoke run"
  hack/bench.sh --profile smoke --out "$artifacts/bench-smoke"
}

# `all` runs the benchmark's smoke beside the real node's Deployment and OLM tests: it shares
# nothing with them (a cluster of its own, ato-bench) and needs the host's operator ports free,
# which they leave free (their operators run in the node's pods). Its numbers are not what the
# smoke checks (every job of every burst must finish); the full benchmark runs alone (make bench).
bench_beside=false bench_pid=""
start_bench_beside() {
  $bench_beside || return 0
  log "benchmark smoke run, beside the real node's Deployment and OLM tests (log: $artifacts/bench-smoke.log)"
  # Its own session, so that clean_up can stop it and bench.sh's EXIT trap deletes its cluster.
  setsid hack/bench.sh --profile smoke --out "$artifacts/bench-smoke" >"$artifacts/bench-smoke.log" 2>&1 &
  bench_pid=$!
}

await_bench() {
  [ -n "$bench_pid" ] || return 0
  local rc=0
  wait "$bench_pid" || rc=$?
  bench_pid=""
  [ "$rc" = 0 ] || { log "benchmark smoke run failed:"; tail -60 "$artifacts/bench-smoke.log"; return 1; }
  log "benchmark smoke run passed"
}

# Kueue's own manager (hack/kueue.sh) admits, holds and preempts the jobs; the operator needs no
# setting for it. Kueue's webhooks go with it: they would refuse every later job create.
# JobSet runs first (started by the gang stages; `hack/jobset.sh up` finds it running, or starts
# it when this stage runs alone): Kueue's TrainJob controller watches JobSets, so their CRD must be
# served when Kueue starts (pytest -m kueue_trainjob: TrainJobs on JobSet, queued by Kueue). JobSet
# keeps running for trainer_tests, which comes next and runs without Kueue.
kueue_started=false
kueue_tests() {
  log "Kueue tests (Kueue $KUEUE_VERSION, log: .local/kueue/; operator log: $artifacts/operator-kueue.log)"
  await_prebuilt jobset kueue
  jobset_started=true
  hack/jobset.sh up
  kueue_started=true
  hack/kueue.sh up
  start_operator "$artifacts/operator-kueue.log"
  pytest -q -m "kueue or kueue_trainjob" tests/queues -p no:cacheprovider || {
    log "Kueue tests failed; operator and JobSet log tails:"
    tail -60 "$artifacts/operator-kueue.log"; tail -40 ".local/jobset/${ATO_CLUSTER:-ato}/jobset.log"
    return 1
  }
  stop_operator
  stop_kueue
}

stop_kueue() {
  if $kueue_started; then hack/kueue.sh down || true; fi
  kueue_started=false
}

# TrainJobs on a real JobSet (tests/trainer): JobSet's manager (hack/jobset.sh, built on first
# use), the operator as for the cluster tests, pytest -m trainer; JobSet's webhooks go with it,
# as Kueue's do. Its logs: .local/jobset/<cluster>/jobset.log and $artifacts/operator-trainer.log.
# Then the side-by-side test (-m trainer_upstream): this operator stopped, upstream's Trainer
# v2.3.0 started (after scheduler-plugins' PodGroup CRD, which it looks for at start-up); the
# test stops it and starts this operator itself (hack/operator-netns.sh). Then the swap test
# (-m swap_trainer, trainer_swap), which starts and stops both itself.
jobset_started=false trainer_started=false
trainer_tests() {
  log "TrainJob tests (JobSet $JOBSET_VERSION; operator log: $artifacts/operator-trainer.log)"
  await_prebuilt jobset
  jobset_started=true
  hack/jobset.sh up
  start_operator "$artifacts/operator-trainer.log"
  pytest -q -m trainer tests/trainer -p no:cacheprovider || {
    log "TrainJob tests failed; operator and JobSet log tails:"
    tail -80 "$artifacts/operator-trainer.log"; tail -40 ".local/jobset/${ATO_CLUSTER:-ato}/jobset.log"
    return 1
  }
  stop_operator
  trainer_side_by_side
  trainer_swap
  stop_jobset
}

trainer_side_by_side() {
  local ours_log="$artifacts/operator-side-by-side.log" trainer_log=".local/trainer/${ATO_CLUSTER:-ato}/trainer.log"
  log "TrainJobs under Trainer $TRAINER_VERSION's controller, then this operator (logs: $trainer_log, $ours_log)"
  await_prebuilt scheduler-plugins trainer
  hack/gang-schedulers.sh plugins crds
  trainer_started=true
  hack/trainer.sh up
  OPERATOR_KUBECONFIG=${operator_kubeconfig:-} SIDE_BY_SIDE_OPERATOR_LOG=$ours_log \
    pytest -q -m trainer_upstream tests/trainer -p no:cacheprovider || {
    log "side-by-side test failed; Trainer's and the operator's log tails:"
    tail -60 "$trainer_log"; tail -60 "$ours_log"
    return 1
  }
  stop_trainer
}

# Upstream's Trainer swapped for this operator with TrainJobs in flight, and back, by the documented
# procedure (hack/swap-trainer.sh, SWAP_RUN=local): the test starts and stops both controllers
# itself, on the JobSet still running; their logs are $artifacts/swap-trainer/ and Trainer's log.
trainer_swap() {
  local trainer_log=".local/trainer/${ATO_CLUSTER:-ato}/trainer.log"
  log "TrainJobs swapped between Trainer $TRAINER_VERSION's controller and this operator (logs: $artifacts/swap-trainer/, $trainer_log)"
  trainer_started=true
  OPERATOR_KUBECONFIG=${operator_kubeconfig:-} pytest -q -m swap_trainer tests/swap -p no:cacheprovider || {
    log "Trainer swap test failed; Trainer's and the operator's log tails:"
    tail -60 "$trainer_log"
    for f in "$artifacts"/swap-trainer/operator-[0-9]*.log; do tail -40 "$f"; done
    return 1
  }
  stop_trainer
}

stop_trainer() {
  if $trainer_started; then hack/trainer.sh down || true; hack/operator-netns.sh down || true; fi
  trainer_started=false
}

stop_jobset() {
  if $jobset_started; then hack/jobset.sh down || true; fi
  jobset_started=false
}

# test_cluster: use_cluster, noting what the run must remove again (see clean_up).
started_cluster=false namespaces_before=""
test_cluster() {
  await_cluster_tools
  if [ -z "${KUBECONFIG:-}" ] && ! hack/cluster.sh running; then started_cluster=true; fi
  use_cluster
  [ -n "$namespaces_before" ] || namespaces_before=$(kubectl get namespaces -o name)
}

# clean_up: what the run created goes, pass or fail. A namespace's pods are removed with grace 0
# once its namespace is deleted: a simulated pod that never terminates would hold it for good.
# The gang schedulers a gang stage started and has not stopped yet (volcano or plugins).
gang_schedulers=""
clean_up() {
  if [ -n "$bench_pid" ]; then
    kill -TERM -- "-$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
    bench_pid=""
  fi
  stop_shard_operator
  stop_operator
  for pid in ${prebuild_pid:-} ${cluster_tools_pids:-}; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  prebuild_pid="" cluster_tools_pids=""
  # Only this run's: a developer's own, started by hand, keeps running through `hack/test.sh lint`.
  [ -z "$gang_schedulers" ] || hack/gang-schedulers.sh "$gang_schedulers" down || true
  gang_schedulers=""
  stop_kueue
  stop_trainer
  stop_jobset
  if $real_node_deployed; then hack/real-node-operator.sh down >/dev/null 2>&1 || true; real_node_deployed=false; fi
  if $real_node_started; then hack/real-node.sh down || true; real_node_started=false; fi
  if [ "${KEEP_TEST_STATE:-false}" = true ]; then
    [ -z "$namespaces_before" ] || log "KEEP_TEST_STATE=true: the cluster keeps what the run left ($KUBECONFIG)"
    return 0
  fi
  if $started_cluster; then
    log "deleting the local cluster this run started"
    hack/cluster.sh down || true
    started_cluster=false namespaces_before=""
  elif [ -n "$namespaces_before" ]; then
    local ns now
    now=$(kubectl get namespaces -o name) || now=""
    # Only the tests' own names (and Kueue's, when the run started it): on a shared cluster
    # others may create namespaces meanwhile.
    for ns in $(grep -vxF -f <(echo "$namespaces_before") <<<"$now" | sed 's|^namespace/||' |
      grep -E '^(ato-.*|1-n+|ansible-training-operator-system|kueue-system)$'); do
      log "deleting namespace $ns (created by this run)"
      kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
      kubectl delete pods --all -n "$ns" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
      # The cluster-wide rules of an operator identity made in it (operator_identity).
      kubectl delete clusterrolebinding,clusterrole "$ns-manager-role" --ignore-not-found >/dev/null 2>&1 || true
    done
    namespaces_before=""
  fi
}
trap clean_up EXIT

# `make test` on a fresh machine: the venv is there (make), the Go tools are not. They build in
# the background while lint and unit run, which need none of them (about 25 CPU minutes for the
# cluster's tools, 20 for the later stages'): builds side by side, so that one compiles while
# another downloads or links.
# - the cluster's tools (the default list of hack/build-go-tools.sh: the control plane, kwok, the
#   runtime, operator-sdk, kustomize), in two builds (Kubernetes; the others), which every stage on
#   the cluster waits for (test_cluster);
# - the later stages' tools (gang schedulers, Kueue, the real node, training-operator for the swap
#   and the benchmark, OLM) and the real node's packages and images, niced: they take only what
#   the cluster's build and the tests leave, and e2e's steps that use them wait for them first.
# A stage run alone (make e2e, make lint...) builds what it needs itself (make tools, its scripts).
cluster_tools_pids=""
build_cluster_tools() {
  log "building the cluster's Go tools in the background (logs: $artifacts/cluster-tools-*.log)"
  # Each in its own process group, so that a run that ends early stops the compilers too (clean_up).
  setsid hack/build-go-tools.sh kube >"$artifacts/cluster-tools-kube.log" 2>&1 &
  cluster_tools_pids=$!
  setsid hack/build-go-tools.sh etcd kwok ansible-operator kustomize operator-sdk \
    >"$artifacts/cluster-tools-others.log" 2>&1 &
  cluster_tools_pids+=" $!"
}

await_cluster_tools() {
  [ -n "$cluster_tools_pids" ] || return 0
  log "waiting for the cluster's Go tools"
  local pid failed=0
  for pid in $cluster_tools_pids; do wait "$pid" || failed=1; done
  cluster_tools_pids=""
  [ "$failed" = 0 ] || {
    log "the cluster's tool build failed:"; tail -20 "$artifacts"/cluster-tools-*.log; return 1
  }
}

prebuild_pid=""
prebuilt="$artifacts/prebuilt"
prebuild_tools() {
  log "building the later stages' tools in the background (log: $artifacts/prebuild.log)"
  rm -rf "$prebuilt"
  setsid nice -n 10 hack/prebuild.sh "$prebuilt" >"$artifacts/prebuild.log" 2>&1 &
  prebuild_pid=$!
}

# await_prebuilt ITEM...: wait until the background build has made each item (hack/prebuild.sh).
await_prebuilt() {
  [ -n "$prebuild_pid" ] || return 0
  local item
  for item in "$@"; do
    [ -e "$prebuilt/$item" ] || log "waiting for the background build of $item"
    until [ -e "$prebuilt/$item" ]; do
      if ! kill -0 "$prebuild_pid" 2>/dev/null; then
        [ -e "$prebuilt/$item" ] && break
        log "the background build failed before $item:"; tail -40 "$artifacts/prebuild.log"; return 1
      fi
      sleep 1
    done
  done
}

stages=()
case ${1:-all} in
  lint | unit | e2e | zygote-off | olm | bench) stages=("$1") ;;
  real-node) stages=(real_node) ;;
  all) stages=(lint unit e2e zygote-off) bench_beside=true ;;
  *) echo "usage: $0 lint|unit|e2e|zygote-off|real-node|olm|bench|all" >&2; exit 2 ;;
esac
[ "${1:-all}" != all ] || build_cluster_tools
case " ${stages[*]} " in *" e2e "*) prebuild_tools ;; esac
for stage in "${stages[@]}"; do
  # The benchmark runs on a cluster of its own: the test cluster need not idle beside it.
  [ "$stage" != bench ] || clean_up
  "${stage//-/_}"
done
# Each stage fails the script on its first error, so reaching here means every stage passed.
echo "${#stages[@]} passed, 0 failed"
