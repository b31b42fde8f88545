"""What a real cluster does that a kind simulator hides, against the running operator: pods that
turn Failed (143) while they are being deleted, evictions, quotas that refuse creates, an
external manager, odd input and huge jobs. Each test names the issue item it reproduces; the
pods' fate comes from the KWOK stages' annotations (README, "Local cluster"); the tests that take
`node` also run on the real node, with real containers (tests/cluster/conftest.py)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import kube
import pytest
from kube import (
    Program,
    finish_job_pods,
    finish_pod,
    get,
    job_pods,
    kubectl,
    namespace_fixture,
    node_replica,
    reconcile_finished,
    replica,
    wait_for,
)
from test_lifecycle import unique

pytestmark = pytest.mark.cluster

NS = "ato-real-cluster"
EVICT_AFTER = "sim.training.ato.dev/evict-after"

namespace = namespace_fixture(NS)
# Quota tests count every pod of their namespace: theirs is empty but for their own job.
QUOTA_NS = "ato-quota"
quota_namespace = namespace_fixture(QUOTA_NS)


def tfjob(name, specs, run_policy=None, namespace=NS):
    return kube.tfjob(name, specs, namespace, run_policy)


def job(name):
    return get("tfjob", "-n", NS, name)


def status(name):
    return job(name).get("status") or {}


def state(name):
    conditions = status(name).get("conditions") or []
    return conditions[-1]["type"] if conditions else ""


def condition(name, ctype):
    return next((c for c in status(name).get("conditions") or [] if c["type"] == ctype), None)


def pod(name):
    result = kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def events(name, reason=None, namespace=NS):
    items = get("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in items if reason is None or e["reason"] == reason]


def with_annotations(spec, **annotations):
    spec["template"]["metadata"]["annotations"].update(annotations)
    return spec


def uid(name):
    return ((pod(name) or {}).get("metadata") or {}).get("uid")


def started(name):
    statuses = ((pod(name) or {}).get("status") or {}).get("containerStatuses") or [{}]
    return all(s.get("started") for s in statuses)


@pytest.mark.parametrize("policy", ["Never", "ExitCode", "OnFailure"])
def test_2_1_a_pod_deleted_by_kubectl_is_replaced_not_a_failure(node, policy):
    """Kubelets >= 1.27 turn a deleted pod Failed (143) before it goes: not a failure."""
    worker = node_replica(node, Program(graceful=True), policy, count=2)
    worker["template"]["spec"]["terminationGracePeriodSeconds"] = 3
    name = tfjob(unique(f"deleted-{policy.lower()}"), {"Worker": worker})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    victim = f"{name}-worker-1"
    before = wait_for(lambda: started(victim) and uid(victim), what=f"{victim} started")
    # A real kubelet removes the pod within a moment of its Failed: a watch sees that moment.
    watch = kube.Watch("pod", victim, NS)
    kubectl("delete", "pod", "-n", NS, victim, "--wait=false")
    wait_for(lambda: uid(victim) not in (None, before), what=f"{victim} recreated")
    failed_while_deleted = [
        p
        for _, p in watch.events()
        if p["metadata"]["uid"] == before
        and p["metadata"].get("deletionTimestamp")
        and p["status"]["phase"] == "Failed"
    ]
    assert failed_while_deleted, "the deleted pod Failed while it still existed"
    terminated = failed_while_deleted[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 143
    assert state(name) == "Running", status(name)
    assert not condition(name, "Failed")
    assert not status(name).get("restartCount")


def test_2_1_scale_down_never_fails_the_job(node):
    worker = node_replica(node, Program(graceful=True), "Never", count=3)
    worker["template"]["spec"]["terminationGracePeriodSeconds"] = 2
    name = tfjob(unique("scaledown"), {"Worker": worker})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    kubectl(
        "patch",
        "tfjob",
        "-n",
        NS,
        name,
        "--type=merge",
        "-p",
        '{"spec":{"tfReplicaSpecs":{"Worker":{"replicas":1}}}}',
    )
    wait_for(lambda: len(job_pods(NS, name)) == 1, what="scaled down to one pod")
    assert state(name) == "Running" and not condition(name, "Failed")


def quota(pods):
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "pods", "namespace": QUOTA_NS},
        "spec": {"hard": {"pods": str(pods)}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(body))
    wait_for(
        lambda: (
            get("resourcequota", "-n", QUOTA_NS, "pods").get("status", {}).get("hard", {}).get("pods")
            == str(pods)
        ),
        what="quota active",
    )


def test_2_2_a_quota_delays_the_job_and_the_job_starts_when_it_is_freed():
    quota(1)

    def state_of(name):
        conditions = get("tfjob", "-n", QUOTA_NS, name).get("status", {}).get("conditions") or []
        return [c["type"] for c in conditions if c["status"] == "True"]

    try:
        name = tfjob(unique("quota"), {"Worker": {**replica(), "replicas": 3}}, namespace=QUOTA_NS)
        refused = wait_for(
            lambda: events(name, "FailedCreatePod", QUOTA_NS), what="a FailedCreatePod warning"
        )
        assert "exceeded quota" in refused[0]["message"]
        time.sleep(12)  # past a create retry
        assert "Failed" not in state_of(name)
        assert len(job_pods(QUOTA_NS, name)) == 1, "the pod already created is kept"
        assert len(events(name, "FailedCreatePod", QUOTA_NS)) == 1, "recorded once"
    finally:
        kubectl("delete", "resourcequota", "-n", QUOTA_NS, "pods", check=False)
    wait_for(lambda: len(job_pods(QUOTA_NS, name)) == 3, what="the missing pods created once freed")
    wait_for(lambda: "Running" in state_of(name), what=f"{name} running")


def test_2_2_an_object_the_api_can_never_accept_fails_the_job():
    worker = replica()
    # A container name must be a DNS-1123 label; only the API server's pod validation says so.
    worker["template"]["spec"]["containers"].append(
        {"name": "Side_Car", "image": "docker.io/library/busybox:1.36"}
    )
    name = tfjob(unique("invalid"), {"Worker": {**worker, "replicas": 2}})
    wait_for(lambda: condition(name, "Failed"), what=f"{name} Failed")
    message = condition(name, "Failed")["message"]
    assert "cannot run" in message and "Invalid value" in message, message
    wait_for(lambda: not job_pods(NS, name), what="nothing half-created left")
    assert not get("services", "-n", NS, "-l", f"training.kubeflow.org/job-name={name}")["items"]


def test_2_3_a_job_managed_by_kueue_is_left_alone():
    name = tfjob(
        unique("kueue"), {"Worker": replica()}, run_policy={"managedBy": "kueue.x-k8s.io/multikueue"}
    )
    # A job created beside it, which the operator does manage: once it has its pod, the operator
    # has had its chance at the other one.
    control = tfjob(unique("kueue-control"), {"Worker": replica()})
    wait_for(lambda: job_pods(NS, control), what=f"{control}'s pod")
    time.sleep(3)
    assert not job_pods(NS, name)
    assert not status(name), "no status is written for a job another controller manages"


@pytest.mark.parametrize(("limit", "workers"), [(4, 4), (0, 1)])
def test_2_4_past_backoff_limit(limit, workers):
    """job_test.go: "4 workers each having 1 restartCount, backoffLimit 4 -> Failed"; limit 0
    fails on the first restart."""
    worker = replica(1, run_for="3s", policy="OnFailure")
    name = tfjob(
        unique(f"backoff{limit}"), {"Worker": {**worker, "replicas": workers}}, {"backoffLimit": limit}
    )
    wait_for(lambda: state(name) == "Failed", what=f"{name} fails by backoff")
    assert "backoff limit" in condition(name, "Failed")["message"]


def test_2_5_an_eviction_loop_ends():
    worker = with_annotations(replica(policy="Never"), **{EVICT_AFTER: "1s"})
    name = tfjob(unique("evictloop"), {"Chief": replica(), "Worker": worker}, {"backoffLimit": 2})
    wait_for(lambda: state(name) == "Failed", interval=1, what=f"{name} fails after its evictions")
    assert status(name)["evictionCount"] == 2
    assert "backoff limit" in condition(name, "Failed")["message"]
    assert len(events(name, "Evicted")) >= 2


def test_2_6_the_deadline_does_not_tick_while_suspended():
    name = tfjob(
        unique("susp-deadline"), {"Worker": replica()}, {"activeDeadlineSeconds": 6, "suspend": True}
    )
    wait_for(lambda: state(name) == "Suspended", what=f"{name} suspended")
    time.sleep(8)
    assert not condition(name, "Failed")
    resumed = datetime.now(UTC).replace(microsecond=0)
    kubectl(
        "patch", "tfjob", "-n", NS, name, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}'
    )
    # Whether a pass sees it Running inside its 6 s depends on the machine: only the end counts.
    wait_for(lambda: state(name) == "Failed", what=f"{name} fails by deadline after resume")
    assert "deadline" in condition(name, "Failed")["message"]
    started = datetime.fromisoformat(status(name)["startTime"].replace("Z", "+00:00"))
    assert started >= resumed, "the deadline counts from the resume, not from the creation"


def test_2_7_a_finished_job_keeps_its_counts_after_its_pods_are_cleaned():
    name = tfjob(unique("keep"), {"Chief": replica(0), "Worker": replica()}, {"cleanPodPolicy": "All"})
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds")
    wait_for(lambda: not job_pods(NS, name), what="pods cleaned")
    before = status(name)
    assert before["replicaStatuses"]["Chief"]["succeeded"] == 1
    # A pass over the finished job (as after an operator restart) recomputes nothing from the pods left.
    reconcile_finished("tfjob", NS, name)
    assert status(name) == before


def test_2_8_a_job_with_more_pod_problems_than_the_status_holds_still_finishes():
    unschedulable = replica()
    unschedulable["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    name = tfjob(unique("huge"), {"Chief": replica(), "Worker": {**unschedulable, "replicas": 110}})
    # The chief ends once the status holds as many problems as it may.
    wait_for(
        lambda: len(status(name).get("reportedPodProblems") or []) == 100,
        interval=2,
        what=f"{name} reporting 100 of its 110 unschedulable pods",
    )
    finish_pod(NS, f"{name}-chief-0")
    wait_for(lambda: state(name) == "Succeeded", interval=2, what=f"{name} succeeds")
    assert len(status(name).get("reportedPodProblems") or []) <= 100
    kubectl("delete", "tfjob", "-n", NS, name, "--wait=false")


def test_2_9_restarts_are_counted_exactly_once_per_pod():
    name = tfjob(unique("once"), {"Worker": replica(137, policy="ExitCode")}, {"backoffLimit": 3})
    wait_for(lambda: state(name) == "Failed", what=f"{name} fails by backoff")
    assert status(name)["restartCount"] == 3


def test_2_11_a_chief_with_zero_replicas_leaves_the_decision_to_worker_0():
    chief = {**replica(), "replicas": 0}
    name = tfjob(unique("nochief"), {"Chief": chief, "Worker": {**replica(0), "replicas": 2}})
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds by worker 0")


def test_2_12_odd_input_fails_the_job_with_the_reason():
    # The typed template admits any int32 (a string is refused at creation, test_admission); the
    # pod API then refuses a port above 65535, and the job fails with its words, nothing half-made.
    worker = replica()
    worker["template"]["spec"]["containers"][0]["ports"] = [{"name": "tfjob-port", "containerPort": 70000}]
    name = tfjob(unique("oddport"), {"Worker": worker})
    wait_for(lambda: condition(name, "Failed"), what=f"{name} Failed")
    assert "containerPort" in condition(name, "Failed")["message"]
    assert not job_pods(NS, name)


def test_2_13_the_operators_tf_config_wins_over_the_templates():
    worker = replica()
    worker["template"]["spec"]["containers"][0]["env"] = [{"name": "TF_CONFIG", "value": "{}"}]
    name = tfjob(unique("envwins"), {"Worker": {**worker, "replicas": 2}})
    created = wait_for(lambda: pod(f"{name}-worker-0"), what="the pod")
    env = created["spec"]["containers"][0]["env"]
    tf_config = [e for e in env if e["name"] == "TF_CONFIG"]
    assert len(tf_config) == 1 and json.loads(tf_config[0]["value"])["cluster"]["worker"]


def caffe2job(name, namespace, replicas=2, backend=None):
    """Its pods run until the test ends them (finish_caffe2)."""
    worker = replica(policy="Never")
    worker["template"]["spec"]["containers"][0]["name"] = "caffe2"
    body = {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "Caffe2Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backendSpecs": backend
            or {"backendType": "redis", "redisHost": "redis.example", "redisPort": 6379},
            "replicaSpecs": {**worker, "replicas": replicas},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(body))
    return name


# A namespace that starts with a digit and is long: <namespace>-<job>-worker-<i> cannot be a name.
LONG_NS = "1-" + "n" * 50
long_namespace = namespace_fixture(LONG_NS)


def test_2_10_caffe2_names_always_fit_and_resolve():
    name = caffe2job("c" * 20, LONG_NS)
    pods = wait_for(lambda: len(job_pods_c2(LONG_NS, name)) == 2 and job_pods_c2(LONG_NS, name), what="pods")
    services = {s["metadata"]["name"] for s in get("services", "-n", LONG_NS)["items"]}
    assert len(services) == 2
    for svc in services:
        assert len(svc) <= 63 and svc[0].isalpha(), svc
    env = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}
    hosts = {h.rsplit(":", 1)[0] for h in json.loads(env["CAFFE2_CONFIG"])["cluster"]["worker"]}
    assert hosts == services, "CAFFE2_CONFIG names exactly the Services that exist"
    for worker in pods:
        finish_pod(LONG_NS, worker["metadata"]["name"])
    wait_for(lambda: caffe2_state(LONG_NS, name) == "Succeeded", what=f"{name} succeeds")


def test_2_16_caffe2_sets_every_variable_even_when_empty():
    name = caffe2job(unique("c2env"), NS, replicas=1, backend={"backendType": "redis", "redisHost": "r"})
    pod = wait_for(lambda: job_pods_c2(NS, name), what="the pod")[0]
    for container in pod["spec"]["containers"]:
        env = {e["name"]: e.get("value", "") for e in container["env"]}
        expected = [
            "REDIS_HOST",
            "REDIS_PORT",
            "NFS_PATH",
            "SHARD_ID",
            "NUM_SHARDS",
            "RUN_ID",
            "CAFFE2_CONFIG",
        ]
        assert list(env)[-7:] == expected
        assert (env["REDIS_HOST"], env["REDIS_PORT"], env["NFS_PATH"]) == ("r", "0", "")


def job_pods_c2(namespace, name):
    """A Caffe2Job's pods, by owner: their caffe2_job_key label is shortened in a long namespace."""
    items = get("pods", "-n", namespace, "-l", "caffe2_replica_type=worker")["items"]
    return [p for p in items if p["metadata"]["ownerReferences"][0]["name"] == name]


def caffe2_state(namespace, name):
    conditions = get("caffe2job", "-n", namespace, name).get("status", {}).get("conditions") or []
    return conditions[-1]["type"] if conditions else ""


@pytest.mark.parametrize(("exit_code", "cleaned"), [(0, True), (1, False)])
def test_2_14_paddle_unset_clean_pod_policy_and_services_in_podip_mode(exit_code, cleaned):
    """paddle-operator v0.3.5: a per-pod Service in every intranet mode; with cleanPodPolicy unset
    the pods and Services go when the job completes and stay when it fails."""
    name = unique(f"pd-unset-{exit_code}")
    worker = replica(policy="Never")
    worker["template"]["spec"]["containers"][0]["name"] = "paddle"
    body = {
        "apiVersion": "batch.paddlepaddle.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"intranet": "PodIP", "worker": {**worker, "replicas": 2}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(body))

    def services():
        return get("services", "-n", NS, "-l", f"training.kubeflow.org/job-name={name}")["items"]

    found = wait_for(lambda: len(services()) == 2 and services(), what="a Service per pod")
    assert sorted(p["port"] for p in found[0]["spec"]["ports"]) == list(range(36000, 36020))
    # The pods end once their Services were seen: a completed job cleans them.
    wait_for(lambda: len(job_pods(NS, name)) == 2, what="both pods")
    finish_job_pods(NS, name, exit_code)
    expected = "Succeeded" if exit_code == 0 else "Failed"

    def state_of():
        conditions = get("paddlejob", "-n", NS, name).get("status", {}).get("conditions") or [{}]
        return conditions[-1].get("type")

    wait_for(lambda: state_of() == expected, what=f"{name} {expected}")
    if cleaned:
        wait_for(
            lambda: not pod(f"{name}-worker-0") and not services(),
            what="pods and Services cleaned",
        )
    else:
        time.sleep(4)
        assert pod(f"{name}-worker-0") and len(services()) == 2
