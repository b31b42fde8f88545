"""training-operator v1.9.4 replaced by this operator with jobs in flight, and back (issue 28,
items 2 and 3): the procedure of docs/swap-training-operator.md, run by the script the page
documents (``hack/swap-training-operator.sh to|from``), so the page and this test cannot drift.

At the swap there are TFJobs and PyTorchJobs running (pods without an exit code: they run until
the test ends them), pending (a replica no node can hold), held back by a ResourceQuota,
suspended, and finished. Across each swap no pod is recreated (same uids), no condition is lost
or added, ``startTime`` stays; after the roll-back every job ends under training-operator as it
would have without the swap.

The module starts and stops both operators itself (``SWAP_RUN=local``: processes in network
namespaces of their own), so it needs the cluster without any other operator: hack/test.sh e2e
runs it in a step of its own (``-m swap_training_operator``). Waits are for states; their bounds
only catch hangs.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kube import ROOT, finish_job_pods, finish_pod, get, kubectl, replica, wait_for
from training_jobs.idle import IDLE_LABEL
from training_jobs.plan import FINISHED_LABEL

pytestmark = pytest.mark.swap_training_operator

NS = "ato-swap"
QUOTA_NS = "ato-swap-quota"
SCRIPT = str(ROOT / "hack" / "swap-training-operator.sh")
ENV = {**os.environ, "SWAP_RUN": "local", "SWAP_STATE": str(ROOT / ".local" / "test" / "swap")}
# A request no node of the cluster (hack/kwok/nodes.yaml) can hold: the pod stays Pending.
HUGE_CPU = {"resources": {"requests": {"cpu": "1000"}}}


def swap(*args: str) -> None:
    # The procedure's own bounds (SWAP_HANG_S) catch a hang; this one only a hung kubectl.
    done = subprocess.run([SCRIPT, *args], env=ENV, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{SCRIPT} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"


def with_containers(spec: dict, name: str, extra: dict) -> dict:
    spec["template"]["spec"]["containers"][0].update(extra)
    spec["template"]["spec"]["containers"][0]["name"] = name
    return spec


def apply(kind: str, name: str, namespace: str, spec: dict) -> tuple[str, str, str]:
    body = {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    kubectl("apply", "-f", "-", stdin=json.dumps({**body, "spec": spec}))
    return kind.lower(), namespace, name


def tf(name: str, specs: dict, namespace: str = NS, **run_policy) -> tuple[str, str, str]:
    return apply("TFJob", name, namespace, {"tfReplicaSpecs": specs, "runPolicy": run_policy})


def pt(name: str, specs: dict) -> tuple[str, str, str]:
    return apply("PyTorchJob", name, NS, {"pytorchReplicaSpecs": specs})


def job(ref: tuple[str, str, str]) -> dict:
    return get(ref[0], "-n", ref[1], ref[2])


def conditions(ref: tuple[str, str, str]) -> list[tuple]:
    """What a swap must keep of each condition (lastUpdateTime too: nobody rewrote it)."""
    keys = ("type", "status", "reason", "message", "lastTransitionTime", "lastUpdateTime")
    return [tuple(c.get(k) for k in keys) for c in (job(ref).get("status") or {}).get("conditions") or []]


def types(ref: tuple[str, str, str]) -> list[tuple[str, str]]:
    return [(c[0], c[1]) for c in conditions(ref)]


def pods(namespace: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in get("pods", "-n", namespace)["items"]}


def all_pods() -> dict[str, str]:
    return {**pods(NS), **{f"{QUOTA_NS}/{k}": v for k, v in pods(QUOTA_NS).items()}}


def phase(namespace: str, name: str) -> str:
    return (get("pod", "-n", namespace, name).get("status") or {}).get("phase", "")


def snapshot(refs: list) -> dict:
    return {r: (conditions(r), (job(r).get("status") or {}).get("startTime")) for r in refs}


@pytest.fixture(scope="module")
def cluster():
    """training-operator running on its own CRDs, as a platform team has it before the swap; after
    the module, both operators stopped, our APIs back, the namespaces going."""
    for ns in (NS, QUOTA_NS):
        kubectl("create", "namespace", ns, check=False)
    swap("local-up")
    yield
    swap("local-down")
    for ns in (NS, QUOTA_NS):
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
        kubectl(
            "delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", "--wait=false", check=False
        )
    kubectl("delete", "namespace", "kubeflow", "--wait=false", check=False)
    # The next step of the e2e run starts hack/run.sh, which installs them too; a run of this
    # module alone leaves the cluster with our APIs, as it found it.
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / "crd"))
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / "admission"))


def pod_spec(count: int, container: str, extra: dict | None = None, exit_code=None) -> dict:
    return with_containers(replica(exit_code, count=count, container=container), container, extra or {})


def start_jobs() -> dict[str, tuple[str, str, str]]:
    """Every state a job can be in at the swap, under training-operator."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods", "namespace": QUOTA_NS}}
    kubectl("apply", "-f", "-", stdin=json.dumps({**quota, "spec": {"hard": {"pods": "1"}}}))
    tfw, ptw = "tensorflow", "pytorch"
    return {
        "tf-running": tf("tf-running", {"Worker": pod_spec(2, tfw)}),
        "tf-ends-with-us": tf("tf-ends-with-us", {"Worker": pod_spec(1, tfw)}),
        "pt-running": pt("pt-running", {"Master": pod_spec(1, ptw), "Worker": pod_spec(1, ptw)}),
        "tf-pending": tf("tf-pending", {"Worker": pod_spec(1, tfw), "PS": pod_spec(1, tfw, HUGE_CPU)}),
        "pt-pending": pt("pt-pending", {"Master": pod_spec(1, ptw), "Worker": pod_spec(1, ptw, HUGE_CPU)}),
        "tf-quota": tf("tf-quota", {"Worker": pod_spec(2, tfw)}, QUOTA_NS),
        "tf-suspended": tf("tf-suspended", {"Worker": pod_spec(1, tfw)}, suspend=True),
        "tf-finished": tf("tf-finished", {"Worker": pod_spec(1, tfw, exit_code=0)}),
        "pt-finished": pt("pt-finished", {"Master": pod_spec(1, ptw, exit_code=0)}),
    }


# What training-operator has written on each job once it reached its state at the swap: the test
# swaps only then, so no write of the stopping operator races the snapshot.
SETTLED = {
    "tf-running": [("Created", "True"), ("Running", "True")],
    "tf-ends-with-us": [("Created", "True"), ("Running", "True")],
    "pt-running": [("Created", "True"), ("Running", "True")],
    "tf-pending": [("Created", "True"), ("Running", "True")],
    "pt-pending": [("Created", "True"), ("Running", "True")],
    # Its pass fails at the refused create, before any status write.
    "tf-quota": [],
    "tf-suspended": [("Created", "True"), ("Suspended", "True")],
    "tf-finished": [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
    "pt-finished": [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
}
RUNNING_PODS = {
    NS: ["tf-running-worker-0", "tf-running-worker-1", "tf-ends-with-us-worker-0", "pt-running-master-0",
         "pt-running-worker-0", "tf-pending-worker-0", "pt-pending-master-0"],
    QUOTA_NS: ["tf-quota-worker-0"],
}  # fmt: skip
PENDING_PODS = {NS: ["tf-pending-ps-0", "pt-pending-worker-0"]}


def settled(jobs: dict) -> bool:
    if any(types(ref) != SETTLED[name] for name, ref in jobs.items()):
        return False
    for state, want in (("Running", RUNNING_PODS), ("Pending", PENDING_PODS)):
        if any(phase(ns, pod) != state for ns, names in want.items() for pod in names):
            return False
    return len(pods(QUOTA_NS)) == 1 and bool(refused_creates())


def refused_creates() -> set[str]:
    events = get("events", "-n", QUOTA_NS, "--field-selector", "reason=FailedCreatePod")["items"]
    return {e["metadata"]["name"] for e in events}


def taken_over(jobs: dict, refused_before: set[str]) -> bool:
    """This operator has made a pass over every job: it labels a job with nothing pending finished
    or idle; the quota-held one stays unlabelled, its next create due in 10 s, and gets a
    Warning of its own for the refused create."""
    for name, ref in jobs.items():
        labels = set(job(ref)["metadata"].get("labels") or {})
        if name != "tf-quota" and not {FINISHED_LABEL, IDLE_LABEL} & labels:
            return False
    return bool(refused_creates() - refused_before)


def kept(before: dict, after: dict) -> None:
    """Every condition of ``before`` is still there, once, with its transition time while its
    status is the same; Running may have turned False as the job ended (training-operator keeps
    its old times then, this operator stamps the transition: docs/swap-training-operator.md)."""
    for ref, (conds, start) in before.items():
        now, now_start = after[ref]
        # A job whose status training-operator never wrote (quota-held) gets its first here.
        assert start is None or now_start == start, (ref, start, now_start)
        seen = [c[0] for c in now]
        assert len(seen) == len(set(seen)), (ref, now)
        for c in conds:
            match = [n for n in now if n[0] == c[0]]
            assert match, (ref, c, now)
            assert match[0][1] != c[1] or match[0][4] == c[4], (ref, c, now)


ENDED = [("Created", "True"), ("Running", "False"), ("Succeeded", "True")]


def check_to(jobs: dict, uids: dict, before: dict, refused: set[str]) -> None:
    """After ``to``: this operator has every job, each as training-operator left it."""
    wait_for(lambda: taken_over(jobs, refused), interval=1, what="this operator's pass over every job")
    assert all_pods() == uids, "no pod recreated or added by the swap"
    # training-operator never wrote the quota-held job's status: this operator adds Created and
    # Running (from when the job was created); every other job's conditions stay as they were.
    quota_held = jobs["tf-quota"]
    after = snapshot(list(jobs.values()))
    assert {k: v for k, v in after.items() if k != quota_held} == {
        k: v for k, v in before.items() if k != quota_held
    }, "conditions and startTime as training-operator left them"
    assert types(quota_held) == [("Created", "True"), ("Running", "True")]


def check_from(jobs: dict, uids: dict) -> None:
    """After ``from``: the quota raised, training-operator creates the pod it was refused; the
    suspended job resumed, it creates its pods; every other pod is the one it left."""
    quota = '{"spec":{"hard":{"pods":"10"}}}'
    kubectl("patch", "resourcequota", "pods", "-n", QUOTA_NS, "--type=merge", "-p", quota)
    wait_for(lambda: len(pods(QUOTA_NS)) == 2, what="training-operator creating the refused pod")
    resume = '{"spec":{"runPolicy":{"suspend":false}}}'
    kubectl("patch", "tfjob", "-n", NS, "tf-suspended", "--type=merge", "-p", resume)
    wait_for(lambda: "tf-suspended-worker-0" in pods(NS), what="tf-suspended resumed by training-operator")
    now = all_pods()
    assert {k: now[k] for k in uids} == uids, "no pod recreated by the roll-back"
    assert set(now) - set(uids) == {f"{QUOTA_NS}/tf-quota-worker-1", "tf-suspended-worker-0"}


def test_swap_to_this_operator_and_back(cluster) -> None:
    jobs = start_jobs()
    wait_for(lambda: settled(jobs), interval=1, what="every job in its state under training-operator")
    uids, before, refused = all_pods(), snapshot(list(jobs.values())), refused_creates()

    swap("to")
    check_to(jobs, uids, before, refused)
    # A job that ends under this operator, the other's conditions before its own.
    finish_job_pods(NS, "tf-ends-with-us")
    ended = jobs["tf-ends-with-us"]
    wait_for(
        lambda: FINISHED_LABEL in (job(ended)["metadata"].get("labels") or {}), what="tf-ends-with-us done"
    )
    assert types(ended) == ENDED
    ours = snapshot(list(jobs.values()))
    kept(before, ours)
    uids = all_pods()

    swap("from")
    check_from(jobs, uids)
    for name in ("tf-running", "pt-running", "tf-pending", "tf-suspended"):
        finish_job_pods(NS, name)
    finish_pod(NS, "pt-pending-master-0")
    finish_job_pods(QUOTA_NS, "tf-quota")
    wait_for(
        lambda: all(types(ref)[-1:] == [("Succeeded", "True")] for ref in jobs.values()),
        interval=1,
        what="every job Succeeded under training-operator",
    )
    # The suspended job was given a startTime by its resume, as training-operator does.
    suspended = jobs["tf-suspended"]
    kept({k: v for k, v in ours.items() if k != suspended}, snapshot(list(jobs.values())))
    # As training-operator ends a job that never saw another operator.
    for name, ref in jobs.items():
        want = ENDED if ref != suspended else [ENDED[0], ("Suspended", "False"), *ENDED[1:]]
        assert types(ref) == want, (name, types(ref))
