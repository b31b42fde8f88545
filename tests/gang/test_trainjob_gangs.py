"""TrainJobs ganged by the real schedulers: a TrainingRuntime with ``podGroupPolicy.volcano`` or
``podGroupPolicy.coscheduling`` (and, as Trainer v2's design asks of the runtime's author, the
scheduler's name in its pod template: neither upstream nor the operator sets it), its TrainJobs
on a real JobSet. The operator renders the PodGroup as Trainer v2.3 does
(``lib/trainer_jobs/podgroups.py``); JobSet's Jobs make the pods at once, whatever the
PodGroup's phase (upstream's Trainer does not hold them back either); the scheduler binds all of
a gang's pods or none.

Each test runs once per scheduler, in that scheduler's stage of ``hack/test.sh e2e``: Volcano's
vc-scheduler (marker ``gang``) and scheduler-plugins' scheduler and controller (marker
``gang_plugins``), started by ``hack/gang-schedulers.sh``, with JobSet running (``hack/jobset.sh``)
through both stages. The operator's ``GANG_SCHEDULER_NAME`` plays no part: for a TrainJob, the
runtime's ``podGroupPolicy`` decides. Nothing here writes a PodGroup's or a pod's status."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import trainjobs
from kube import delete_namespace, get, kubectl, wait_for

# A node label no node has until a test sets it (test_volcano.py's gate has its own name).
GATE_LABEL = "ato.test/trainjob-gang-gate"
# The nodes a gated gang may use: the two plain KWOK nodes (hack/kwok/nodes.yaml), of equal size.
GATE_NODES = ("kwok-cpu-0", "kwok-cpu-1")
IMAGE = "docker.io/library/busybox:1.36"


@dataclass(frozen=True)
class Gang:
    """One scheduler's side: its name, the runtime's policy, its PodGroup and the pod mark."""

    scheduler: str
    policy: dict
    pod_group: str
    mark: tuple[str, str]  # ("labels" | "annotations", key): the pod's tie to its PodGroup
    too_few: str  # what the scheduler says on a pod whose gang has fewer pods than minMember (1 of 2)

    @property
    def runtime(self) -> str:
        return "gang-" + next(iter(self.policy))

    @property
    def namespace(self) -> str:
        """One per scheduler: the second stage's never waits for the first's to be deleted."""
        return "ato-gang-trainjob-" + next(iter(self.policy))


VOLCANO = Gang("volcano", {"volcano": {}}, "podgroup.scheduling.volcano.sh",
               ("annotations", "scheduling.k8s.io/group-name"),
               "pod group is not ready, 1 Pending, 2 minAvailable")  # fmt: skip
# A short timeout: a gang that cannot fit is rejected at Permit (and retried) within the test.
COSCHEDULING = Gang("scheduler-plugins-scheduler", {"coscheduling": {"scheduleTimeoutSeconds": 5}},
                    "podgroup.scheduling.x-k8s.io", ("labels", "scheduling.x-k8s.io/pod-group"),
                    "current pods number: 1, minMember of group: 2")  # fmt: skip
GANGS = [
    pytest.param(VOLCANO, id="volcano", marks=pytest.mark.gang),
    pytest.param(COSCHEDULING, id="coscheduling", marks=pytest.mark.gang_plugins),
]


def _served(crd: str, hint: str) -> None:
    if kubectl("get", "crd", crd, check=False).returncode != 0:
        raise RuntimeError(f"{crd} is not served: {hint}")


@pytest.fixture(scope="module")
def runtime(gang: Gang):
    """The gang's namespace and its TrainingRuntime there, once its scheduler and JobSet run; the
    namespace goes after the scheduler's tests."""
    _served("jobsets.jobset.x-k8s.io", "hack/jobset.sh up")
    if gang is VOLCANO and kubectl("get", "queue.scheduling.volcano.sh", "default", check=False).returncode:
        raise RuntimeError("Volcano's scheduler does not run: hack/gang-schedulers.sh volcano up")
    if gang is COSCHEDULING:
        _served("podgroups.scheduling.x-k8s.io", "hack/gang-schedulers.sh plugins up")
    pod_spec = {"schedulerName": gang.scheduler, "containers": [{"name": "node", "image": IMAGE}]}
    node_job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod_spec}},
        },
    }
    manifest = {
        "apiVersion": trainjobs.API,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": gang.runtime,
            "namespace": gang.namespace,
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": gang.policy,
            "template": {"spec": {"replicatedJobs": [node_job]}},
        },
    }
    kubectl("create", "namespace", gang.namespace, check=False)
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(manifest))
    yield gang.runtime
    delete_namespace(gang.namespace)


def create(
    gang: Gang, name: str, nodes: int, cpu: str, node_selector: dict | None = None, runtime: str = ""
) -> None:
    """A TrainJob of ``nodes`` pods of ``cpu`` each, on the gang's runtime; ``node_selector``
    reaches the pods through a runtime patch of the TrainJob's own (as a user writes one)."""
    spec: dict = {
        "runtimeRef": {
            "name": runtime or gang.runtime,
            "kind": "TrainingRuntime",
            "apiGroup": "trainer.kubeflow.org",
        },
        "trainer": {"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu, "memory": "1Gi"}}},
    }
    if node_selector:
        pod_spec = {"nodeSelector": node_selector}
        node_job = {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
        spec["runtimePatches"] = [
            {
                "manager": "ato.test/gang",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node_job]}}},
            }
        ]
    manifest = {
        "apiVersion": trainjobs.API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": gang.namespace},
        "spec": spec,
    }
    kubectl("create", "-f", "-", stdin=json.dumps(manifest))


def pod_group(gang: Gang, name: str) -> dict | None:
    found = kubectl("get", gang.pod_group, "-n", gang.namespace, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def bound_by(gang: Gang, pod: dict) -> bool:
    """The pod's Scheduled event comes from the gang's scheduler (not the default one)."""
    selector = f"involvedObject.kind=Pod,involvedObject.name={pod['metadata']['name']},reason=Scheduled"
    events = get("events", "-n", gang.namespace, "--field-selector", selector)["items"]
    return any(
        gang.scheduler in (e.get("reportingComponent"), (e.get("source") or {}).get("component"))
        for e in events
    )


def scheduling_verdict(pod: dict) -> dict | None:
    """The scheduler's latest word on the pod (its PodScheduled condition), once it has spoken."""
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), None)


def complete(gang: Gang, name: str) -> None:
    def done():
        conditions = (trainjobs.trainjob(gang.namespace, name).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_for(done, what=f"TrainJob {name} Complete")


def delete(gang: Gang, name: str) -> None:
    """The TrainJob deleted, its PodGroup goes with it (the garbage collector, by its owner)."""
    kubectl("delete", "trainjob", "-n", gang.namespace, name, "--wait=false")
    wait_for(lambda: pod_group(gang, name) is None, what=f"the PodGroup of {name} gone with its TrainJob")


@pytest.mark.parametrize("gang", GANGS, scope="module")
def test_the_pod_group_is_the_trainjobs_and_its_gang_runs_to_complete(gang: Gang, runtime: str):
    name = f"{gang.runtime}-fits"
    create(gang, name, nodes=3, cpu="500m")
    pg = wait_for(lambda: pod_group(gang, name), what=f"the PodGroup of {name}")
    assert pg["spec"]["minMember"] == 3, "every pod of the TrainJob is a member"
    assert pg["spec"]["minResources"] == {"cpu": "1500m", "memory": "3Gi"}, "the pods' requests, summed"
    if gang is COSCHEDULING:
        assert pg["spec"]["scheduleTimeoutSeconds"] == 5
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob", name, trainjobs.trainjob(gang.namespace, name)["metadata"]["uid"], True,
    )  # fmt: skip
    pods = trainjobs.running(gang.namespace, name, 3)
    where, key = gang.mark
    for p in pods:
        assert p["spec"]["schedulerName"] == gang.scheduler, "the runtime's scheduler reaches the pod"
        assert p["metadata"][where][key] == name, f"the pod joins its PodGroup ({key})"
        assert p["spec"]["nodeName"]
    wait_for(lambda: all(bound_by(gang, p) for p in pods), what=f"every pod bound by {gang.scheduler}")
    # Each scheduler keeps its PodGroup's status (Volcano itself, scheduler-plugins' controller).
    wait_for(
        lambda: ((pod_group(gang, name) or {}).get("status") or {}).get("phase") == "Running",
        what="the PodGroup's phase Running",
    )
    trainjobs.finish(gang.namespace, name)
    complete(gang, name)
    delete(gang, name)


def _gate_cpu() -> str:
    """More than half of a gate node's CPUs: each gate node holds one such pod, never two."""
    cpus = min(int(get("node", node)["status"]["allocatable"]["cpu"]) for node in GATE_NODES)
    return str(cpus // 2 + 1)


@pytest.mark.parametrize("gang", GANGS, scope="module")
def test_no_pod_binds_while_the_gang_does_not_fit_then_all_do(gang: Gang, runtime: str):
    """Two pods that need a gate node each, one gate node open: one pod could be bound, but its
    gang cannot, so neither is. Once a second node opens, both are bound and the TrainJob runs
    to Complete."""
    name = f"{gang.runtime}-gated"
    first, second = GATE_NODES
    try:
        kubectl("label", "node", first, f"{GATE_LABEL}=open", "--overwrite")
        create(gang, name, nodes=2, cpu=_gate_cpu(), node_selector={GATE_LABEL: "open"})
        refused = wait_for(
            lambda: (pods := trainjobs.pods(gang.namespace, name)) and len(pods) == 2
            and all(scheduling_verdict(p) for p in pods) and pods,
            what=f"{gang.scheduler}'s verdict on each pod of the gang",
        )  # fmt: skip
        assert [p["spec"].get("nodeName") for p in refused] == [None, None], "no pod of the gang bound alone"
        assert [scheduling_verdict(p)["status"] for p in refused] == ["False", "False"], refused
        if gang is VOLCANO:
            # Volcano says so on the PodGroup (written after the pods, in the same session's end):
            # one of two could be placed, the gang could not.
            wait_for(
                lambda: any(
                    "1/2 tasks in gang unschedulable" in c.get("message", "")
                    for c in (pod_group(gang, name).get("status") or {}).get("conditions") or []
                ),
                what="Volcano's verdict on the PodGroup",
            )
            assert all(not p["spec"].get("nodeName") for p in trainjobs.pods(gang.namespace, name))
        kubectl("label", "node", second, f"{GATE_LABEL}=open", "--overwrite")
        pods = trainjobs.running(gang.namespace, name, 2)
        assert {p["spec"]["nodeName"] for p in pods} == set(GATE_NODES), "one pod on each gate node"
        trainjobs.finish(gang.namespace, name)
        complete(gang, name)
    finally:
        for node in GATE_NODES:
            kubectl("label", "node", node, f"{GATE_LABEL}-", check=False)
    delete(gang, name)


def mpi_runtime(gang: Gang, name: str, launcher_waits: bool) -> str:
    """The built-in deepspeed-distributed (MPI: a launcher and the nodes) with the gang's policy and
    scheduler; without its launcher's ``dependsOn`` (node Ready) unless ``launcher_waits``."""
    spec = get("clustertrainingruntimes.trainer.kubeflow.org", "deepspeed-distributed")["spec"]
    spec["podGroupPolicy"] = gang.policy
    for rjob in spec["template"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["schedulerName"] = gang.scheduler
        if not launcher_waits:
            rjob.pop("dependsOn", None)
    metadata = {
        "name": name,
        "namespace": gang.namespace,
        "labels": {"trainer.kubeflow.org/framework": "deepspeed"},
    }
    manifest = {"apiVersion": trainjobs.API, "kind": "TrainingRuntime", "metadata": metadata, "spec": spec}
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(manifest))
    return name


@pytest.mark.parametrize("gang", GANGS, scope="module")
def test_an_mpi_gang_counts_its_launcher_which_must_not_wait_for_the_nodes(gang: Gang, runtime: str):
    """``minMember`` counts the launcher (upstream's rule). The built-in MPI runtimes start the
    launcher once the nodes are Ready (``dependsOn``, trainer#3748): ganged, the nodes wait for a
    launcher that is never made, so nothing ever starts - in upstream's Trainer v2.3.0 too. A gang
    runtime without that ``dependsOn`` starts launcher and nodes together."""
    waits = mpi_runtime(gang, f"mpi-{gang.runtime}-waits", launcher_waits=True)
    create(gang, "mpi-waits", nodes=2, cpu="500m", runtime=waits)
    assert wait_for(lambda: pod_group(gang, "mpi-waits"), what="its PodGroup")["spec"]["minMember"] == 2

    def refused_for_want_of_the_launcher() -> list[dict]:
        # Its first verdict may be another (a pod that came before its PodGroup); this one stays.
        pods = trainjobs.pods(gang.namespace, "mpi-waits")
        return [p for p in pods if gang.too_few in (scheduling_verdict(p) or {}).get("message", "")]

    (node,) = wait_for(
        refused_for_want_of_the_launcher, what=f"{gang.scheduler} refusing the gang of one pod"
    )
    assert not node["spec"].get("nodeName")
    assert trainjobs.pods(gang.namespace, "mpi-waits", "launcher") == [], "JobSet waits for the nodes"
    delete(gang, "mpi-waits")

    together = mpi_runtime(gang, f"mpi-{gang.runtime}", launcher_waits=False)
    create(gang, "mpi", nodes=2, cpu="500m", runtime=together)
    pods = trainjobs.running(gang.namespace, "mpi", 2)
    assert sorted(p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods) == [
        "launcher", "node",
    ]  # fmt: skip
    wait_for(
        lambda: all(bound_by(gang, p) for p in pods), what=f"launcher and node bound by {gang.scheduler}"
    )
    trainjobs.finish(gang.namespace, "mpi")
    complete(gang, "mpi")
    delete(gang, "mpi")


def queued_runtime(gang: Gang, queue: str, priority: str) -> str:
    """The gang's runtime with a Volcano queue (the JobSet template's annotation, as upstream's
    guide writes it) and a priorityClassName on its pods."""
    spec = get("trainingruntimes.trainer.kubeflow.org", "-n", gang.namespace, gang.runtime)["spec"]
    spec["template"]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": queue}}
    for rjob in spec["template"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["priorityClassName"] = priority
    name = f"{gang.runtime}-queued"
    metadata = {"name": name, "namespace": gang.namespace}
    manifest = {"apiVersion": trainjobs.API, "kind": "TrainingRuntime", "metadata": metadata, "spec": spec}
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(manifest))
    return name


def volcano_said(gang: Gang, pod_group_name: str, text: str) -> bool:
    """Volcano has recorded ``text`` in an event on the PodGroup (a scheduling session saw it)."""
    selector = f"involvedObject.kind=PodGroup,involvedObject.name={pod_group_name}"
    events = get("events", "-n", gang.namespace, "--field-selector", selector)["items"]
    return any(text in e.get("message", "") for e in events)


@pytest.mark.parametrize(
    "gang", [pytest.param(VOLCANO, id="volcano", marks=pytest.mark.gang)], scope="module"
)
def test_the_runtimes_volcano_queue_holds_a_second_gang_until_the_first_is_done(gang: Gang, runtime: str):
    """The queue and the priority class reach the PodGroup, and Volcano applies them: a Queue of
    2 CPUs runs one gang of 2 CPUs and holds the next, with no pod bound, until the first is done."""
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
             "metadata": {"name": "ato-trainjob-small"},
             "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": "2"}}}  # fmt: skip
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "ato-trainjob-high"}, "value": 1000}  # fmt: skip
    kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [queue, priority]})
    )
    try:
        queued = queued_runtime(gang, "ato-trainjob-small", "ato-trainjob-high")
        create(gang, "first", nodes=2, cpu="1", runtime=queued)
        trainjobs.running(gang.namespace, "first", 2)
        create(gang, "second", nodes=2, cpu="1", runtime=queued)
        wait_for(
            lambda: volcano_said(gang, "second", "queue resource quota insufficient"),
            what="the queue holding it",
        )
        pg = pod_group(gang, "second")
        assert (pg["spec"]["queue"], pg["spec"]["priorityClassName"]) == (
            "ato-trainjob-small",
            "ato-trainjob-high",
        )
        held = trainjobs.pods(gang.namespace, "second")
        assert len(held) == 2 and all(not p["spec"].get("nodeName") for p in held), (
            "no pod of a held gang bound"
        )
        trainjobs.finish(gang.namespace, "first")
        complete(gang, "first")
        trainjobs.running(gang.namespace, "second", 2)
        trainjobs.finish(gang.namespace, "second")
        complete(gang, "second")
    finally:
        for name in ("first", "second"):
            kubectl("delete", "trainjob", "-n", gang.namespace, name, "--wait=false", check=False)
        wait_for(
            lambda: not trainjobs.pods(gang.namespace, "first") + trainjobs.pods(gang.namespace, "second"),
            what="the TrainJobs' pods gone",
        )
        kubectl("delete", "queue.scheduling.volcano.sh", "ato-trainjob-small", "--wait=false", check=False)
        kubectl("delete", "priorityclass", "ato-trainjob-high", "--wait=false", check=False)
