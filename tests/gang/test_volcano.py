"""Gang scheduling with Volcano, against an operator started with GANG_SCHEDULER_NAME=volcano and
Volcano's real scheduler (vc-scheduler v1.10.0, built from its module and run on the host by
hack/gang-schedulers.sh, with its own PodGroup and Queue CRDs): hack/test.sh e2e runs this stage
with both. The operator creates the PodGroup, Volcano moves it Pending -> Inqueue -> Running and
binds the pods; nothing here writes a PodGroup's status."""

from __future__ import annotations

import calendar
import json
import time

import pytest
from kube import IMAGE, Watch, finish_job_pods, get, job_pods, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.gang

NS = "ato-gang"
PG = "podgroup.scheduling.volcano.sh"
QUEUE = "queue.scheduling.volcano.sh"
# A node label no node has until a test sets it: a replica that selects it cannot be placed.
GATE_LABEL = "ato.test/gang-gate"


def scheduler_runs() -> None:
    """Volcano's scheduler creates its default queue as it starts: without it nothing here can pass."""
    if kubectl("get", QUEUE, "default", check=False).returncode != 0:
        raise RuntimeError("Volcano's scheduler does not run: hack/gang-schedulers.sh volcano up")


namespace = namespace_fixture(NS, before=scheduler_runs)


def container(cpu: str = "500m") -> dict:
    return {"name": "tensorflow", "image": IMAGE, "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}


def tfjob(name: str, replicas: dict[str, int], policy: dict, selector: dict | None = None, **run) -> str:
    """A TFJob of pods that run until the test ends them; ``selector`` is the Workers' nodeSelector."""

    def template(rtype: str) -> dict:
        spec: dict = {"containers": [container()]}
        if selector and rtype == "Worker":
            spec["nodeSelector"] = selector
        return {"spec": spec}

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": policy, **run},
            "tfReplicaSpecs": {r: {"replicas": n, "template": template(r)} for r, n in replicas.items()},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    return name


def pod_group(name: str) -> dict | None:
    found = kubectl("get", PG, "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def phase(name: str) -> str:
    return ((pod_group(name) or {}).get("status") or {}).get("phase") or ""


def running_pods(job: str, count: int) -> list[dict]:
    pods = job_pods(NS, job)
    ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else []


def volcano_said(name: str, text: str) -> bool:
    """Volcano has recorded ``text`` in an event on the PodGroup (a scheduling session saw it)."""
    events = get(
        "events", "-n", NS, "--field-selector", f"involvedObject.kind=PodGroup,involvedObject.name={name}"
    )
    return any(text in e.get("message", "") for e in events["items"])


def job_events(name: str, reason: str) -> list[str]:
    events = get(
        "events", "-n", NS, "--field-selector", f"involvedObject.kind=TFJob,involvedObject.name={name}"
    )
    return [e["message"] for e in events["items"] if e["reason"] == reason]


def delete_job(name: str) -> None:
    kubectl("delete", "tfjob", "-n", NS, name, "--wait=false", check=False)
    wait_for(lambda: pod_group(name) is None, what=f"the PodGroup of {name} garbage-collected with its job")


def test_volcano_admits_the_gang_before_any_pod_exists():
    """Pending -> Inqueue -> Running, set by Volcano; the operator's first pod comes after Inqueue
    (training-operator #1630). Both watches start before the job exists; one etcd orders every
    write of the cluster, so resourceVersions order the PodGroup's phases and the pods' creation."""
    pod_groups, pods = Watch(PG, "", NS), Watch("pods", "", NS)
    tfjob("admitted", {"PS": 1, "Worker": 2}, {"queue": "default"})
    created = wait_for(lambda: running_pods("admitted", 3), what="three running pods")
    wait_for(lambda: phase("admitted") == "Running", what="Volcano's Running phase")
    seen = [
        (int(o["metadata"]["resourceVersion"]), (o.get("status") or {}).get("phase") or "")
        for _, o in pod_groups.events()
    ]
    # Volcano reads a PodGroup without a phase as Pending (JobInfo.IsPending), and writes Pending
    # only when a session does not admit it at once.
    seen = [(rv, ph or "Pending") for rv, ph in seen]
    phases = [ph for i, (_, ph) in enumerate(seen) if i == 0 or seen[i - 1][1] != ph]
    assert phases == ["Pending", "Inqueue", "Running"], seen
    inqueue_at = min(rv for rv, ph in seen if ph == "Inqueue")
    added = [int(o["metadata"]["resourceVersion"]) for kind, o in pods.events() if kind == "ADDED"]
    assert len(added) == 3 and min(added) > inqueue_at, "no pod before Volcano admits the gang"
    for p in created:
        assert p["spec"]["schedulerName"] == "volcano"
        assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "admitted"
        assert p["spec"]["nodeName"], "bound by Volcano"
    pg = pod_group("admitted")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minResources"] == {"cpu": "1500m", "memory": "3Gi"}
    assert pg["metadata"]["ownerReferences"][0]["name"] == "admitted"
    delete_job("admitted")


def test_gang_binds_all_pods_together_or_none():
    """Volcano places the PS alone easily, but the gang needs the Workers too: none is bound while
    one cannot be placed, and all are once they can."""
    node = get("nodes")["items"][0]["metadata"]["name"]
    tfjob("together", {"PS": 1, "Worker": 2}, {"queue": "default"}, selector={GATE_LABEL: "open"})
    try:
        wait_for(lambda: phase("together") == "Inqueue", what="the gang admitted (resources are there)")
        unplaced = wait_for(
            lambda: (pods := job_pods(NS, "together")) and len(pods) == 3
            and all(_unschedulable(p) for p in pods) and pods,
            what="Volcano's verdict on each pod of the gang",
        )  # fmt: skip
        assert [p["spec"].get("nodeName") for p in unplaced] == [None] * 3, "the PS waits for its Workers"
        kubectl("label", "node", node, f"{GATE_LABEL}=open")
        bound = wait_for(lambda: running_pods("together", 3), what="the whole gang bound and running")
        assert {
            p["spec"]["nodeName"] for p in bound if p["metadata"]["name"].startswith("together-worker")
        } == {node}
        wait_for(lambda: phase("together") == "Running", what="Volcano's Running phase")
    finally:
        kubectl("label", "node", node, f"{GATE_LABEL}-", check=False)
    delete_job("together")


def _unschedulable(pod: dict) -> bool:
    conditions = pod["status"].get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)


def test_a_gang_larger_than_the_cluster_never_gets_pods_and_says_why():
    # 1000 CPUs: the local cluster has 192.
    tfjob("too-big", {"Worker": 2}, {"queue": "default", "minResources": {"cpu": "1000", "memory": "2Gi"}})
    wait_for(
        lambda: volcano_said("too-big", "queue resource quota insufficient"), what="Volcano refusing the gang"
    )

    def said_why():
        return [m for m in job_events("too-big", "PodGroupPending") if "Volcano has not admitted" in m]

    (why,) = wait_for(said_why, what="the job saying why after seeing Volcano's verdict")
    assert "minResources cpu 1k, memory 2Gi" in why and "queue 'default'" in why, why
    status = get("tfjob", "-n", NS, "too-big")["status"]
    assert status["podGroupPendingMessage"] == why
    assert "startTime" not in status
    assert phase("too-big") == "Pending"
    assert job_pods(NS, "too-big") == [], "no pod for a gang Volcano never admits"
    delete_job("too-big")


def test_queue_capability_holds_later_jobs_until_capacity_frees():
    """A Queue of 2 CPUs holds a second 2-CPU gang Pending while the first runs, and admits it once
    the first has finished; the job's queue and priorityClass are the PodGroup's. The held job's
    activeDeadlineSeconds counts from its admission, not from its creation."""
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "ato-gang-small"},
             "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": "2"}}}  # fmt: skip
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "ato-gang-high"}, "value": 1000}  # fmt: skip
    kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [queue, priority]})
    )
    policy = {"queue": "ato-gang-small", "priorityClass": "ato-gang-high", "minResources": {"cpu": "2"}}
    try:
        tfjob("first", {"Worker": 2}, policy)
        wait_for(lambda: running_pods("first", 2), what="the first gang running")
        second = tfjob("second", {"Worker": 2}, policy, activeDeadlineSeconds=5)
        wait_for(
            lambda: volcano_said(second, "queue resource quota insufficient"), what="the queue holding it"
        )
        pg = pod_group(second)
        assert pg["spec"]["queue"] == "ato-gang-small" and pg["spec"]["priorityClassName"] == "ato-gang-high"
        wait_for(
            lambda: get("tfjob", "-n", NS, second)["status"].get("podGroupPendingMessage"), what="the hold"
        )
        # Held past its deadline (a lower bound, not a speed): counted from creation it would fail now.
        created = _seconds(get("tfjob", "-n", NS, second)["metadata"]["creationTimestamp"])
        wait_for(lambda: time.time() > created + 7, what="the held job older than its deadline")
        status = get("tfjob", "-n", NS, second)["status"]
        assert "startTime" not in status and not _condition(second, "Failed")
        assert phase(second) == "Pending" and job_pods(NS, second) == []
        finish_job_pods(NS, "first")
        wait_for(lambda: running_pods(second, 2), what="the second gang admitted once the first finished")
        status = get("tfjob", "-n", NS, second)["status"]
        assert "podGroupPendingMessage" not in status and status.get("startTime")
        failed = wait_for(lambda: _condition(second, "Failed"), what="the deadline, counted from admission")
        assert "deadline" in failed["message"]
    finally:
        for job in ("first", "second"):
            kubectl("delete", "tfjob", "-n", NS, job, "--wait=false", check=False)
        wait_for(lambda: not job_pods(NS, "first") + job_pods(NS, "second"), what="the jobs' pods gone")
        kubectl("delete", QUEUE, "ato-gang-small", "--wait=false", check=False)
        kubectl("delete", "priorityclass", "ato-gang-high", "--wait=false", check=False)


def _seconds(timestamp: str) -> float:
    return calendar.timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))


def _condition(job: str, kind: str) -> dict | None:
    conditions = (get("tfjob", "-n", NS, job).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)
