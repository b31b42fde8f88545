"""Kubeflow Trainer v2.3.0's controller manager replaced by this operator with TrainJobs in flight,
and back (issue 36, item 4): the procedure of docs/swap-trainer.md, run by the script the page
documents (``hack/swap-trainer.sh to-ato|to-upstream``), so the page and this test cannot drift.

At the first swap there are TrainJobs running (pods without an exit code: they run until the test
ends them; one of them MPI, with its SSH Secret and hostfile), pending (a node asking for more CPU
than any node has; a coscheduling gang whose scheduler never admits it), suspended and finished,
all started by upstream's controller. Across each swap no JobSet, PodGroup, pod, ConfigMap or
Secret is made again (same uids) or rewritten, and a TrainJob's status stays as the other
controller left it (every condition with its reason, message and transition time; ``jobsStatus``)
until something happens to it. Then the new controller must drive them: a suspended TrainJob
resumes when unsuspended, a running one completes when its pods end, on the same JobSet.

The module starts and stops both controllers itself (``SWAP_RUN=local``: upstream's through
hack/trainer.sh, this operator in a network namespace of its own), so it needs JobSet running and
no operator of this checkout: hack/test.sh runs it right after the side-by-side test
(``-m swap_trainer``). Waits are for states; their bounds only catch hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import partial

import pytest
import trainjobs
from kube import FINISHED, ROOT, delete_namespace, get, kubectl, wait_for
from training_kube.events import REPORTING_COMPONENT

pytestmark = pytest.mark.swap_trainer

NS = "ato-swap-trainer"
SCRIPT = str(ROOT / "hack" / "swap-trainer.sh")
STATE = ROOT / ".local" / "test" / "swap-trainer"
ENV = {**os.environ, "SWAP_RUN": "local", "SWAP_STATE": str(STATE)}
# A request no node of the cluster (hack/kwok/nodes.yaml) can hold: the pod stays Pending.
HUGE_CPU = {"requests": {"cpu": "1000"}}
JOBSET_SIGNATURE = "training.ato.dev/jobset-signature"
TRAINER_LOG = ROOT / ".local" / "trainer" / os.environ.get("ATO_CLUSTER", "ato") / "trainer.log"
WEBHOOKS = (
    "validatingwebhookconfiguration/validator.trainer.kubeflow.org",
    "mutatingwebhookconfiguration/defaulter.trainer.kubeflow.org",
)
# The last of roles/trainjob's tasks, as the runtime logs its start: the pass was planned and applied.
LAST_TASK = "trainjob : Look at the TrainJob again"
# What each controls beside its pods (plural.group as kubectl takes it).
OWNED = ("jobsets.jobset.x-k8s.io", "podgroups.scheduling.x-k8s.io", "configmaps", "secrets")
# torch-distributed as a coscheduling gang whose scheduler does not run: its PodGroup is never
# admitted, its pods stay Pending.
GANG_RUNTIME = "ato-swap-gang"
GANG_SCHEDULER = "scheduler-plugins-scheduler"

create = partial(trainjobs.create, NS)
trainjob = partial(trainjobs.trainjob, NS)
running = partial(trainjobs.running, NS)
finish = partial(trainjobs.finish, NS)


def swap(command: str) -> None:
    # The procedure's own bounds (SWAP_HANG_S) catch a hang; this one only a hung kubectl.
    done = subprocess.run([SCRIPT, command], env=ENV, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{SCRIPT} {command}:\n{done.stdout}\n{done.stderr}"


def script(*args: str) -> None:
    done = subprocess.run(
        [str(ROOT / "hack" / args[0]), *args[1:]], env=ENV, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"hack/{' '.join(args)}:\n{done.stdout}\n{done.stderr}"


def gang_runtime() -> dict:
    runtime = get("clustertrainingruntimes.trainer.kubeflow.org", "torch-distributed")
    spec = runtime["spec"]
    spec["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    for job in spec["template"]["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["schedulerName"] = GANG_SCHEDULER
    metadata = {"name": GANG_RUNTIME, "labels": runtime["metadata"].get("labels") or {}}
    return {"apiVersion": trainjobs.API, "kind": "ClusterTrainingRuntime", "metadata": metadata, "spec": spec}


@pytest.fixture(scope="module")
def cluster():
    """Upstream's Trainer on its own CRDs and runtimes, as a platform team has it before the swap;
    after the module, both controllers stopped, our APIs back, the namespace going."""
    STATE.mkdir(parents=True, exist_ok=True)
    kubectl("create", "namespace", NS, check=False)
    # Trainer watches PodGroups only if their CRD is there when it starts.
    script("gang-schedulers.sh", "plugins", "crds")
    swap("local-up")
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(gang_runtime()))
    yield
    swap("local-down")
    delete_namespace(NS)
    kubectl("delete", "clustertrainingruntimes.trainer.kubeflow.org", GANG_RUNTIME, "--ignore-not-found")
    # Upstream's release overlay has runtimes ours has not; the next step of the e2e run (or a
    # developer's make run) finds the cluster with our APIs, as it was before the module.
    for name in kubectl("get", "clustertrainingruntimes.trainer.kubeflow.org", "-o", "name").stdout.split():
        if name.split("/")[-1].startswith("torchtune-"):
            kubectl("delete", name, "--ignore-not-found")
    for kustomization in ("crd", "admission", "runtimes"):
        kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / kustomization))


# name -> (runtime, spec.trainer, other spec fields). "running" ends under this operator, "mpi"
# under upstream after the roll-back, "gap" and "long" while neither controller runs (before
# to-ato and before to-upstream: the next one finds them ended); "suspended" is resumed by this operator,
# "suspended-back" by upstream after the roll-back; "pending" and "gang" never run.
TRAINJOBS = {
    "running": ("jax-distributed", {"numNodes": 2}, {}),
    "long": ("torch-distributed", {"numNodes": 1}, {}),
    "gap": ("xgboost-distributed", {"numNodes": 1}, {}),
    "mpi": ("deepspeed-distributed", {"numNodes": 2}, {}),
    "pending": ("xgboost-distributed", {"numNodes": 1, "resourcesPerNode": HUGE_CPU}, {}),
    "gang": (GANG_RUNTIME, {"numNodes": 2}, {}),
    "suspended": ("jax-distributed", {"numNodes": 1}, {"suspend": True}),
    "suspended-back": ("xgboost-distributed", {"numNodes": 1}, {"suspend": True}),
    "finished": ("xgboost-distributed", {"numNodes": 1}, {}),
}


def conditions(name: str) -> list[tuple]:
    """What a swap must keep of each condition (its time too: nobody rewrote it)."""
    keys = ("type", "status", "reason", "message", "lastTransitionTime")
    return [
        tuple(c.get(k) for k in keys) for c in (trainjob(name).get("status") or {}).get("conditions") or []
    ]


def types(name: str) -> list[tuple[str, str, str]]:
    return [c[:3] for c in conditions(name)]


def status(name: str) -> tuple[list[tuple], list[dict]]:
    return conditions(name), (trainjob(name).get("status") or {}).get("jobsStatus") or []


def statuses() -> dict[str, tuple]:
    return {name: status(name) for name in TRAINJOBS}


def owned() -> dict[str, str]:
    """kind/name -> uid of every object a TrainJob of the namespace controls, and every pod."""
    found = {}
    for kind in OWNED:
        for item in get(kind, "-n", NS)["items"]:
            if any(o["kind"] == "TrainJob" for o in item["metadata"].get("ownerReferences") or []):
                found[f"{item['kind']}/{item['metadata']['name']}"] = item["metadata"]["uid"]
    for pod in get("pods", "-n", NS)["items"]:
        trainjob_name = (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name", "")
        found[f"Pod/{trainjob_name}/{pod['metadata']['name']}"] = pod["metadata"]["uid"]
    return found


def secrets() -> dict[str, dict]:
    return {s["metadata"]["name"]: s.get("data") for s in get("secrets", "-n", NS)["items"]}


def pods_in(name: str, phase: str, count: int) -> bool:
    found = trainjobs.pods(NS, name)
    return len(found) == count and all(p["status"].get("phase") == phase for p in found)


def jobs_status(**counts) -> dict:
    return {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **counts}


# Each TrainJob's jobsStatus once in its state at the swap: JobSet counts Jobs (one per replicated
# job here), not pods.
RUNNING = jobs_status(ready=1, active=1)
SETTLED_JOBS = {
    "running": [{"name": "node", **RUNNING}],
    "long": [{"name": "node", **RUNNING}],
    "gap": [{"name": "node", **RUNNING}],
    "mpi": [{"name": "node", **RUNNING}, {"name": "launcher", **RUNNING}],
    "pending": [{"name": "node", **jobs_status(active=1)}],
    "gang": [{"name": "node", **jobs_status(active=1)}],
    "suspended": [{"name": "node", **jobs_status(suspended=1)}],
    "suspended-back": [{"name": "node", **jobs_status(suspended=1)}],
    "finished": [{"name": "node", **jobs_status(succeeded=1)}],
}
SETTLED_CONDITIONS = {
    "suspended": [("Suspended", "True", "Suspended")],
    "suspended-back": [("Suspended", "True", "Suspended")],
    "finished": [("Complete", "True", "AllJobsCompleted")],
}


def settled() -> bool:
    """Every TrainJob in its state, its status written by upstream's controller: the test swaps only
    then, so no write of the stopping controller races the snapshot."""
    for name, jobs in SETTLED_JOBS.items():
        if status(name)[1] != jobs or types(name) != SETTLED_CONDITIONS.get(name, []):
            return False
    return pods_in("pending", "Pending", 1) and pods_in("gang", "Pending", 2) and pods_in("mpi", "Running", 2)


def start_trainjobs() -> None:
    for name, (runtime, trainer, spec) in TRAINJOBS.items():
        create(name, runtime, trainer, **spec)
    running("finished", 1)
    finish("finished")


def taken_over(finished: list[str]) -> bool:
    """This operator has seen every TrainJob: it labels each finished one on its first pass over it,
    and its companion has written each unfinished one's JobSet signature (which reconciles it)."""
    for name in TRAINJOBS:
        meta = trainjob(name)["metadata"]
        mark = (
            FINISHED in (meta.get("labels") or {})
            if name in finished
            else JOBSET_SIGNATURE in (meta.get("annotations") or {})
        )
        if not mark:
            return False
    return True


def log_entries(text: str) -> list[dict]:
    """The JSON lines of a controller's log; a line still being written when read is left out."""
    entries = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return entries


def operator_passed(names: list[str]) -> bool:
    """This operator's log shows a whole pass of each TrainJob: its last task started."""
    logs = sorted(STATE.glob("operator-[0-9]*.log"), key=lambda p: p.stat().st_mtime)
    passed = {
        entry.get("name")
        for entry in log_entries(logs[-1].read_text() if logs else "")
        if entry.get("namespace") == NS and entry.get("EventData.Name") == LAST_TASK
    }
    return passed >= set(names)


def upstream_listed(offset: int) -> bool:
    """Upstream's controller, started after ``offset`` of its log, has listed every TrainJob (its
    predicate logs each one's create event at info level; its passes log only at level 2)."""
    with TRAINER_LOG.open() as log:
        log.seek(offset)
        text = log.read()
    listed = {
        (entry.get("trainJob") or {}).get("name")
        for entry in log_entries(text)
        if entry.get("msg") == "TrainJob create event"
        and (entry.get("trainJob") or {}).get("namespace") == NS
    }
    return listed >= set(TRAINJOBS)


def our_events(name: str) -> set[str]:
    """The reasons of the events this operator posted about the TrainJob."""
    events = get("events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    return {e["reason"] for e in events if e.get("reportingComponent") == REPORTING_COMPONENT}


def upstream_stopped() -> bool:
    """Upstream's controller manager is not running, and no webhook configuration of it is left."""
    running = subprocess.run([str(ROOT / "hack" / "trainer.sh"), "running"], env=ENV, capture_output=True)
    left = kubectl("get", *WEBHOOKS, "--ignore-not-found", "-o", "name").stdout.strip()
    return running.returncode != 0 and not left


def versions() -> dict[str, str]:
    """kind/name -> resourceVersion of each PodGroup, ConfigMap and Secret a TrainJob controls: an
    apply that changed one (the hostfile, the snapshot) would show here, nothing else writes them."""
    found = {}
    for kind in OWNED[1:]:
        for item in get(kind, "-n", NS)["items"]:
            if any(o["kind"] == "TrainJob" for o in item["metadata"].get("ownerReferences") or []):
                found[f"{item['kind']}/{item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
    return found


def generations() -> dict[str, int]:
    """Each JobSet's generation: a swap applies none of them again (only a resume does)."""
    return {j["metadata"]["name"]: j["metadata"]["generation"] for j in get(OWNED[0], "-n", NS)["items"]}


def end_while_stopped(name: str, *stop: str) -> None:
    """Stop the controller running (the swap's step 1, earlier), then end the TrainJob's pods; its
    JobSet completes while no controller of TrainJobs runs."""
    script(*stop)
    finish(name)
    wait_for(
        lambda: any(
            c["type"] == "Completed" and c["status"] == "True"
            for c in (trainjobs.jobset(NS, name) or {}).get("status", {}).get("conditions") or []
        ),
        what=f"JobSet {name} Completed",
    )


def resume(name: str) -> None:
    patch = json.dumps({"spec": {"suspend": False}})
    kubectl("patch", "trainjobs.trainer.kubeflow.org", "-n", NS, name, "--type=merge", "-p", patch)


def completes(name: str) -> None:
    wait_for(
        lambda: ("Complete", "True", "AllJobsCompleted") in types(name), what=f"TrainJob {name} Complete"
    )


def resumed_and_completed(name: str, uids: dict[str, str]) -> None:
    """Unsuspended, the TrainJob's own JobSet (the one upstream made suspended) runs its pods."""
    resume(name)
    wait_for(lambda: ("Suspended", "False", "Resumed") in types(name), what=f"{name} resumed")
    running(name, 1)
    assert get("jobsets.jobset.x-k8s.io", "-n", NS, name)["metadata"]["uid"] == uids[f"JobSet/{name}"]
    finish(name)
    completes(name)
    assert types(name) == [("Suspended", "False", "Resumed"), ("Complete", "True", "AllJobsCompleted")]


def kept(before: dict[str, str], after: dict[str, str], ended: set[str]) -> None:
    """No object of ``before`` made again or gone, but pods of a TrainJob in ``ended`` (a Job
    removes none, but may finish them): every uid the same."""
    for key, uid in before.items():
        if key.startswith("Pod/") and key.split("/")[1] in ended and key not in after:
            continue
        assert after.get(key) == uid, f"{key}: {uid} before the swap, {after.get(key)} after"


def unique_types(name: str) -> None:
    seen = [c[0] for c in conditions(name)]
    assert len(seen) == len(set(seen)), (name, seen)


def test_swap_to_this_operator_and_back(cluster) -> None:
    start_trainjobs()
    wait_for(settled, interval=1, what="every TrainJob in its state under upstream's Trainer")
    before, uids, keys, specs, written = statuses(), owned(), secrets(), generations(), versions()
    assert {
        "Secret/mpi-mpi-ssh-auth",
        "ConfigMap/mpi-mpi-hostfile",
        "PodGroup/gang",
        "JobSet/pending",
    } <= set(uids)

    end_while_stopped("gap", "trainer.sh", "stop")
    swap("to-ato")
    assert upstream_stopped(), "upstream's controller and its webhooks gone"
    wait_for(
        lambda: taken_over(["finished", "gap"]), interval=1, what="this operator's pass over every TrainJob"
    )
    wait_for(lambda: operator_passed(list(TRAINJOBS)), interval=1, what="a pass of each TrainJob in the log")
    assert owned() == uids, "no JobSet, pod, ConfigMap or Secret made again by the swap"
    assert generations() == specs, "no JobSet applied again by the swap"
    assert versions() == written, "no PodGroup, ConfigMap or Secret changed by the swap"
    assert secrets() == keys, "MPI's SSH keys as upstream made them"
    assert {**statuses(), "gap": None} == {**before, "gap": None}, (
        "conditions and jobsStatus as upstream left them"
    )
    # Ended while no controller ran: this operator's first pass completes it.
    assert types("gap") == [("Complete", "True", "AllJobsCompleted")]
    assert status("gap")[1] == [{"name": "node", **jobs_status(succeeded=1)}]
    assert "AllJobsCompleted" in our_events("gap")
    resumed_and_completed("suspended", uids)
    assert {"Resumed", "AllJobsCompleted"} <= our_events("suspended"), "this operator resumed it"
    finish("running")
    completes("running")
    assert status("running")[1] == [{"name": "node", **jobs_status(succeeded=1)}]
    ours = statuses()
    for name in ("long", "mpi", "pending", "gang", "suspended-back", "finished"):
        assert ours[name] == before[name], f"{name}: its status as upstream left it"
    for name in TRAINJOBS:
        unique_types(name)
    uids, specs = owned(), generations()

    end_while_stopped("long", "operator-netns.sh", "down")
    seen = TRAINER_LOG.stat().st_size if TRAINER_LOG.exists() else 0
    swap("to-upstream")
    wait_for(lambda: upstream_listed(seen), interval=1, what="upstream's controller listing every TrainJob")
    # Each TrainJob's first pass is queued before the resume's: once upstream has resumed it and
    # ended the others, it has passed over every TrainJob.
    resumed_and_completed("suspended-back", uids)
    completes("long")  # its JobSet completed while neither controller ran
    finish("mpi", "launcher")
    completes("mpi")
    kept(uids, owned(), {"suspended-back", "long", "mpi"})
    assert versions() == written, "no PodGroup, ConfigMap or Secret changed by either controller"
    for name in ("suspended-back", "long", "mpi"):
        assert not our_events(name) & {"Resumed", "AllJobsCompleted"}, f"{name}: upstream alone drove it"
    untouched = ("running", "gap", "suspended", "finished", "pending", "gang")
    assert {n: g for n, g in generations().items() if n in untouched} == {n: specs[n] for n in untouched}
    assert secrets() == keys, "MPI's SSH keys as upstream made them"
    after = statuses()
    for name in untouched:
        assert after[name] == ours[name], f"{name}: its status as this operator left it"
    for name in TRAINJOBS:
        unique_types(name)
    # As upstream ends a TrainJob that never saw another controller.
    for name in ("long", "mpi"):
        assert types(name) == [("Complete", "True", "AllJobsCompleted")], (name, types(name))
