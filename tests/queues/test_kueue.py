"""Kueue v0.19 (its real manager, hack/kueue.sh up) queues the operator's jobs: every kind Kueue
integrates is suspended at its creation, admitted to the GPU flavor of config/kueue/queues.yaml,
held while the quota is used, preempted by a job of a higher priority and admitted again.
hack/test.sh e2e runs this stage with Kueue started and the operator as for the cluster tests.

The ClusterQueue's stopPolicy Hold keeps a job waiting for as long as a test needs: admission is
Kueue's to give, so a test holds the queue instead of racing it."""

from __future__ import annotations

import json
import time
from functools import partial

import kueue_queues as queues
import pytest
from kube import IMAGE, finish_job_pods, get, job_pods, kubectl, wait_for
from kueue_queues import (
    GPU_NODES,
    GPU_TOLERATION,
    PODSET_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    condition,
    is_true,
    queue_held,
)
from training_jobs.registry import BY_KIND

pytestmark = pytest.mark.kueue

NS = "ato-kueue"
IDLE_LABEL = "training.ato.dev/idle"
# Two one-GPU pods per job; the ClusterQueue holds four GPUs.
KINDS = {
    "TFJob": (("Worker", 2),),
    "PyTorchJob": (("Master", 1), ("Worker", 1)),
    "XGBoostJob": (("Master", 1), ("Worker", 1)),
    "JAXJob": (("Worker", 2),),
    "PaddleJob": (("Master", 1), ("Worker", 1)),
}
namespace = queues.queues_fixture(NS)
watch = queues.watch_fixture(NS)
workload = partial(queues.workload, NS)
workload_is = partial(queues.workload_is, NS)


def resource(kind: str) -> str:
    # With the group: "paddlejob" alone may mean paddle-operator's.
    return f"{kind.lower()}s.kubeflow.org"


def gpu_replica(container: str, count: int) -> dict:
    resources = {"limits": {"nvidia.com/gpu": "1"}}
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [{"name": container, "image": IMAGE, "resources": resources}]}},
    }


def manifest(kind: str, name: str, priority: str | None = None, **spec) -> dict:
    profile = BY_KIND[("kubeflow.org/v1", kind)]
    replicas = {r: gpu_replica(profile.default_container, n) for r, n in KINDS[kind]}
    labels = {QUEUE_LABEL: "training", **({PRIORITY_LABEL: priority} if priority else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {profile.replica_specs_field: replicas, **spec},
    }


def create(job: dict) -> str:
    kubectl("create", "-f", "-", stdin=json.dumps(job))
    return job["metadata"]["name"]


def job(kind: str, name: str) -> dict:
    return get(resource(kind), "-n", NS, name)


def templates(obj: dict, kind: str) -> dict:
    spec = obj["spec"][BY_KIND[("kubeflow.org/v1", kind)].replica_specs_field]
    return {r: s["template"] for r, s in spec.items()}


def running_pods(name: str, count: int) -> list[dict]:
    def running():
        pods = job_pods(NS, name)
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods) and pods

    return wait_for(running, what=f"{count} running pods of {name}")


def pod_count(kind: str) -> int:
    return sum(n for _, n in KINDS[kind])


def finish(kind: str, name: str, exit_code: int = 0, *, ttl: bool = False) -> dict | None:
    """End the job's pods; the job once it has the condition this exit code gives it. With
    ``ttl`` (a one-second ``ttlSecondsAfterFinished``), None if the TTL deleted it before a
    poll saw the condition."""
    finish_job_pods(NS, name, exit_code)
    state = "Succeeded" if exit_code == 0 else "Failed"

    def done():
        found = kubectl("get", resource(kind), "-n", NS, name, "-o", "json", check=False)
        if found.returncode != 0:
            assert ttl and "NotFound" in found.stderr, found.stderr
            return True
        j = json.loads(found.stdout)
        return is_true(j, state) and j

    finished = wait_for(done, what=f"{name} {state}")
    return finished if isinstance(finished, dict) else None


def delete(kind: str, *names: str) -> None:
    kubectl("delete", resource(kind), "-n", NS, *names, "--wait=false", "--ignore-not-found")


def parked_while_held(kind: str, name: str) -> dict:
    """Wait until the operator has seen the held job: Suspended, and parked (labelled idle, so
    that only a change to the job brings it back, Kueue's admission among them)."""
    return wait_for(
        lambda: (
            (j := job(kind, name)) and is_true(j, "Suspended") and IDLE_LABEL in j["metadata"]["labels"] and j
        ),
        what=f"{name} suspended and parked",
    )


# --- suspended at creation, admitted, finished ---------------------------------------------------


def held_at_creation(kind: str, name: str, watch) -> None:
    """Created while the queue is held: Kueue's webhook suspends the job, and no pod or Service
    of it ever exists while it waits."""
    selector = f"training.kubeflow.org/job-name={name}"
    with queue_held():
        watches = [watch("pods", selector), watch("services", selector)]
        create(manifest(kind, name))
        w = wait_for(lambda: workload(kind, name), what=f"the Workload of {name}")
        # The operator's first pass creates what it creates before it writes Created.
        wait_for(lambda: is_true(job(kind, name), "Created"), what=f"{name} seen by the operator")
        for w, what in zip(watches, ("pod", "Service"), strict=True):
            assert w.events() == [], f"no {what} of {name} before its admission"
        waiting = parked_while_held(kind, name)
        assert waiting["spec"]["runPolicy"]["suspend"] is True, "Kueue's webhook suspends it at creation"
        assert "startTime" not in waiting["status"], "never started"
        assert not is_true(waiting, "Running")
        assert not is_true(workload(kind, name) or w, "QuotaReserved"), "held: nothing admitted"


def assert_admitted_pods(kind: str, name: str) -> None:
    """The flavor's nodeSelector and toleration, and the podset label, on every pod."""
    for pod in running_pods(name, pod_count(kind)):
        rtype = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"]
        assert pod["metadata"]["labels"][PODSET_LABEL] == rtype, pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"] == GPU_NODES, pod["metadata"]["name"]
        assert GPU_TOLERATION in pod["spec"]["tolerations"], pod["metadata"]["name"]
        assert pod["spec"]["nodeName"].startswith("kwok-gpu-")


OUTCOMES = {"TFJob": 0, "PyTorchJob": 0, "XGBoostJob": 1, "JAXJob": 0, "PaddleJob": 1}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_queued_job_waits_suspended_then_runs_where_kueue_admits_it(kind, watch):
    name = f"{kind.lower()}-admitted"
    held_at_creation(kind, name, watch)
    admitted = wait_for(lambda: workload_is(kind, name, "Admitted"), what=f"{name} admitted")
    admitted_at = condition(admitted, "Admitted")["lastTransitionTime"]
    assert_admitted_pods(kind, name)
    started = job(kind, name)
    assert started["status"]["startTime"] >= admitted_at, "startTime set at admission"
    assert not is_true(started, "Suspended")
    ready = wait_for(lambda: workload_is(kind, name, "PodsReady"), what=f"{name} PodsReady")
    running = condition(job(kind, name), "Running")
    assert (
        running["status"] == "True"
        and running["lastTransitionTime"] <= condition(ready, "PodsReady")["lastTransitionTime"]
    ), "PodsReady follows the job's Running condition"
    finish(kind, name, OUTCOMES[kind])
    done = wait_for(lambda: workload_is(kind, name, "Finished"), what=f"{name}'s Workload Finished")
    assert condition(done, "Finished")["reason"] == ("Succeeded" if OUTCOMES[kind] == 0 else "Failed")
    delete(kind, name)


# --- quota ----------------------------------------------------------------------------------------


def test_jobs_beyond_the_quota_wait_without_pods_and_start_in_order(watch):
    first = [create(manifest("TFJob", f"quota-{i}")) for i in (1, 2)]
    for name in first:
        running_pods(name, 2)
    waiting = ["quota-3", "quota-4"]
    quota_4_pods = watch("pods", "training.kubeflow.org/job-name=quota-4")
    create(manifest("TFJob", waiting[0]))
    wait_for(lambda: workload("TFJob", waiting[0]), what="the Workload of quota-3")
    # StrictFIFO orders by creation time, in seconds: quota-4 must be the younger.
    time.sleep(1.1)
    create(manifest("TFJob", waiting[1]))
    for name in waiting:
        parked = wait_for(lambda n=name: (j := job("TFJob", n)) and is_true(j, "Suspended") and j, what=name)
        assert parked["spec"]["runPolicy"]["suspend"] is True
        assert job_pods(NS, name) == []
        wait_for(lambda n=name: workload("TFJob", n), what=f"the Workload of {name}")
    finish("TFJob", "quota-1")
    running_pods("quota-3", 2)
    later = job("TFJob", "quota-4")
    assert later["spec"]["runPolicy"]["suspend"] is True, "one job's quota freed: only the older starts"
    assert not workload_is("TFJob", "quota-4", "QuotaReserved")
    assert quota_4_pods.events() == [], "no pod of quota-4 while it waits"
    finish("TFJob", "quota-2")
    running_pods("quota-4", 2)
    for name in ("quota-3", "quota-4"):
        finish("TFJob", name)
    delete("TFJob", "quota-1", "quota-2", "quota-3", "quota-4")


# --- preemption -----------------------------------------------------------------------------------


def preempted(names: list[str]) -> str:
    """The job Kueue suspended to make room (one of ``names``)."""

    def victim():
        return next((n for n in names if job("TFJob", n)["spec"]["runPolicy"].get("suspend")), None)

    return wait_for(victim, what=f"one of {names} preempted")


def assert_stopped(name: str, original: dict, kind: str = "TFJob") -> None:
    """A preempted job: its pods go, nothing active, Suspended, and Kueue has put the templates
    back as they were before the admission (no flavor, no podset label)."""
    wait_for(lambda: job_pods(NS, name) == [], what=f"the pods of {name} gone")
    stopped = wait_for(lambda: (j := job(kind, name)) and is_true(j, "Suspended") and j, what=name)
    assert not is_true(stopped, "Running")
    assert all(s["active"] == 0 for s in stopped["status"]["replicaStatuses"].values())
    for rtype, template in templates(stopped, kind).items():
        assert "nodeSelector" not in template["spec"], rtype
        assert "tolerations" not in template["spec"], rtype
        assert PODSET_LABEL not in (template.get("metadata") or {}).get("labels", {}), rtype
        assert template["spec"]["containers"] == original[rtype]["spec"]["containers"], rtype


@pytest.mark.parametrize("ttl", [None, 1], ids=["no-ttl", "ttl"])
def test_a_higher_priority_job_preempts_and_the_victim_runs_again(ttl):
    """Two low jobs fill the quota and are parked (idle); a high one preempts one of them, which
    Kueue admits again once the high one is done. A TTL never touches the suspended victim."""
    suffix = "ttl" if ttl else "plain"
    run_policy = {"runPolicy": {"ttlSecondsAfterFinished": ttl}} if ttl else {}
    low = [create(manifest("TFJob", f"low-{i}-{suffix}", "low", **run_policy)) for i in (1, 2)]
    before = {}
    for name in low:
        uids = {p["metadata"]["uid"] for p in running_pods(name, 2)}
        parked = wait_for(
            lambda n=name: (j := job("TFJob", n)) and IDLE_LABEL in j["metadata"]["labels"] and j, what=name
        )
        before[name] = (uids, parked["status"]["startTime"])
    original = templates(manifest("TFJob", "x"), "TFJob")
    high = create(manifest("TFJob", f"high-{suffix}", "high", **run_policy))
    victim = preempted(low)
    assert_stopped(victim, original)
    running_pods(high, 2)
    assert not workload_is("TFJob", victim, "Admitted")
    finish("TFJob", high, ttl=bool(ttl))
    again = running_pods(victim, 2)
    assert not {p["metadata"]["uid"] for p in again} & before[victim][0], "new pods"
    assert job("TFJob", victim)["status"]["startTime"] > before[victim][1], "a new startTime"
    for name in low:
        finish("TFJob", name, ttl=bool(ttl))
    if ttl:
        gone = wait_for(
            lambda: kubectl("get", resource("TFJob"), "-n", NS, victim, check=False).returncode != 0,
            what=f"{victim} deleted by its TTL once it succeeded",
        )
        assert gone
    delete("TFJob", *low, high)


# --- an elastic PyTorchJob's autoscaler -----------------------------------------------------------

CPU_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def hpa_exists(name: str) -> bool:
    return kubectl("get", "hpa", "-n", NS, name, check=False).returncode == 0


def test_a_preempted_elastic_job_has_no_autoscaler_until_it_runs_again():
    """The HPA scales the job's replicas as the scale subresource's spec gives them, whether the
    job runs or not (kube-controller-manager's HPA controller): while Kueue holds the job
    suspended, the operator keeps none, so nothing resizes a job waiting in the queue."""
    elastic = manifest("PyTorchJob", "elastic", "low")
    elastic["spec"] = {
        "pytorchReplicaSpecs": {"Worker": gpu_replica("pytorch", 2)},
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, "metrics": [CPU_METRIC]},
    }
    create(elastic)
    first = {p["metadata"]["uid"] for p in running_pods("elastic", 2)}
    wait_for(lambda: hpa_exists("elastic"), what="the HPA of the running job")
    big = manifest("TFJob", "big", "high")
    big["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 4
    create(big)
    assert_stopped("elastic", templates(elastic, "PyTorchJob"), "PyTorchJob")
    wait_for(lambda: not hpa_exists("elastic"), what="no HPA while the job is suspended")
    running_pods("big", 4)
    finish("TFJob", "big")
    again = running_pods("elastic", 2)
    assert not {p["metadata"]["uid"] for p in again} & first
    wait_for(lambda: hpa_exists("elastic"), what="the HPA back once the job runs again")
    assert job("PyTorchJob", "elastic")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    finish("PyTorchJob", "elastic")
    delete("TFJob", "big")
    delete("PyTorchJob", "elastic")


# --- a kind Kueue does not integrate, as a plain pod group ------------------------------------------

POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ADMISSION_GATE = {"name": "kueue.x-k8s.io/admission"}


# Kinds Kueue does not integrate, with three pods each: (replica specs field, types and counts,
# container, the rest of the spec).
GROUP_KINDS = {
    "MXJob": (
        "mxReplicaSpecs",
        (("Scheduler", 1), ("Server", 1), ("Worker", 1)),
        "mxnet",
        {"jobMode": "MXTrain"},
    ),
    "MPIJob": ("mpiReplicaSpecs", (("Launcher", 1), ("Worker", 2)), "mpi", {"slotsPerWorker": 1}),
}


def pod_group_job(kind: str, name: str) -> dict:
    """A job whose three pods form one Kueue pod group: every replica's template carries the
    queue, the group's name and its size."""
    field, types, container, rest = GROUP_KINDS[kind]
    # Kueue's finalizer holds a deleted pod of a group until it is terminal: the simulated
    # kubelet ends a deleted pod as a real one does only with graceful-delete (README).
    metadata = {
        "labels": {QUEUE_LABEL: "training", POD_GROUP_LABEL: name},
        "annotations": {POD_GROUP_COUNT: "3", "sim.training.ato.dev/graceful-delete": "true"},
    }
    replicas = {}
    for rtype, count in types:
        spec = gpu_replica(container, count)
        spec["template"]["metadata"] = metadata
        replicas[rtype] = spec
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {field: replicas, **rest},
    }


def gated_pods(name: str) -> list[dict]:
    pods = job_pods(NS, name)
    gated = [p for p in pods if ADMISSION_GATE in (p["spec"].get("schedulingGates") or [])]
    return len(pods) == 3 and len(gated) == 3 and pods


def group_workload(name: str) -> dict | None:
    """A pod group's Workload, named after the group."""
    found = kubectl("get", "workloads.kueue.x-k8s.io", "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


@pytest.mark.parametrize("kind", sorted(GROUP_KINDS))
def test_a_job_kueue_does_not_integrate_queued_as_a_plain_pod_group(kind):
    """Kueue's pod framework gates each pod of the group at its creation and lets them all go
    once the group is admitted, with the flavor's nodeSelector; the operator runs the job as
    usual around the gated pods."""
    name = f"{kind.lower()}-group"
    with queue_held():
        create(pod_group_job(kind, name))
        for pod in wait_for(lambda: gated_pods(name), what=f"3 gated pods of {name}"):
            assert "nodeName" not in pod["spec"], "gated: not scheduled"
        waiting = wait_for(lambda: group_workload(name), what=f"the Workload of the group {name}")
        assert not is_true(waiting, "QuotaReserved")
        assert not is_true(job(kind, name), "Running")
    for pod in running_pods(name, 3):
        assert pod["spec"]["nodeSelector"] == GPU_NODES
        assert not pod["spec"].get("schedulingGates")
    wait_for(lambda: is_true(job(kind, name), "Running"), what=f"{name} Running")
    finish(kind, name)
    wait_for(lambda: is_true(group_workload(name) or {}, "Finished"), what=f"the Workload of {name} Finished")
    delete(kind, name)
