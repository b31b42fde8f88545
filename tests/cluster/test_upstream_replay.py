"""Upstream's own test scenarios, replayed black-box against the running operator.

One test per upstream test case, named after it (a parametrized table row has the upstream
description as its id), with a docstring quoting the upstream file and case. Sources:
kubeflow/training-operator v1.9.0 (TFJob Go tests) and v1.8.1 (MXJob), the historic
kubeflow/tf-operator Python e2e tests (py/kubeflow/tf_operator/), kubeflow/mxnet-operator,
PaddleFlow/paddle-operator v0.3.5 and kubeflow/caffe2-operator.

Upstream's unit tests set pod phases and status counters directly; here every scenario is
driven through real pods whose fate comes from the KWOK annotations of the local cluster
(README "Local cluster"). All replicas of one type share a template, so a single index gets
its own fate by annotating that pod once it exists (KWOK re-evaluates its stages on every
pod update). Where an upstream row cannot be reproduced black-box, the equivalent real
scenario is driven and the docstring says so.

Expected outcomes are this operator's documented behaviour. Where it deliberately differs
from upstream, the docstring says "Deliberate difference: ..." (docs/upgrade-notes.md).

Speed: the jobs of one section (one upstream file or two) are created together, in one
request, and the fates of their pods are given as soon as the pods exist, so that all of a
section's scenarios run at once; each test then only waits for its own job's outcome and
deletes the job.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from kube import HANG_S, Watch, kubectl, namespace_fixture, reconcile_finished

pytestmark = pytest.mark.cluster

NS = "ato-replay"
namespace = namespace_fixture(NS)

IMAGE = "docker.io/library/busybox:1.36"
SIM = "sim.training.ato.dev/"
# The operator is shared, and a whole section's jobs start at the same time: a wait only catches
# a hang (kube.HANG_S).
TIMEOUT = HANG_S
FINISHED = ("Succeeded", "Failed")
RESOURCES = {
    "TFJob": "tfjobs.kubeflow.org",
    "MXJob": "mxjobs.kubeflow.org",
    "PaddleJob": "paddlejobs.batch.paddlepaddle.org",
    "Caffe2Job": "caffe2jobs.kubeflow.org",
}
SIGNATURE = "training.ato.dev/pod-signature"

TO = "kubeflow/training-operator v1.9.0"
TF_E2E = "kubeflow/tf-operator py/kubeflow/tf_operator"


# --- pod fates: KWOK annotations -------------------------------------------------------------
def ok(run_for: str = "1s") -> dict[str, str]:
    """The pod's containers exit 0 after ``run_for``: the pod Succeeds."""
    return {SIM + "exit-code": "0", SIM + "run-for": run_for}


def fail(code: int = 1, run_for: str = "1s") -> dict[str, str]:
    """The pod's containers exit ``code`` after ``run_for``: the pod Fails (under Never)."""
    return {SIM + "exit-code": str(code), SIM + "run-for": run_for}


PENDING = {SIM + "start-after": "600s"}  # the pod stays Pending
START = {SIM + "start-after": "0s"}  # overrides PENDING on one pod


# --- manifests --------------------------------------------------------------------------------
def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def rep(
    replicas: int = 1,
    fate: dict[str, str] | None = None,
    policy: str | None = "Never",
    container: str = "tensorflow",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **pod_spec: Any,
) -> dict[str, Any]:
    """A replica spec; without a fate its pods run until deleted."""
    meta: dict[str, Any] = {"annotations": {**(fate or {}), **(annotations or {})}}
    if labels:
        meta["labels"] = labels
    spec = {"replicas": replicas, "template": {"metadata": meta, "spec": {**pod_spec}}}
    spec["template"]["spec"]["containers"] = [{"name": container, "image": IMAGE}]
    if policy:
        spec["restartPolicy"] = policy
    return spec


def mxrep(replicas: int = 1, fate=None, policy: str | None = "Never", **kw) -> dict[str, Any]:
    return rep(replicas, fate, policy, container="mxnet", **kw)


def _manifest(kind: str, api: str, prefix: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": unique(prefix), "namespace": NS},
        "spec": spec,
    }


def tfjob(prefix: str, specs: dict, run_policy: dict | None = None, **spec: Any) -> dict[str, Any]:
    body = {"tfReplicaSpecs": specs, **spec}
    if run_policy is not None:
        body["runPolicy"] = run_policy
    return _manifest("TFJob", "kubeflow.org/v1", prefix, body)


def mxjob(prefix: str, specs: dict, run_policy: dict | None = None, **spec: Any) -> dict[str, Any]:
    body = {"mxReplicaSpecs": specs, **spec}
    if run_policy is not None:
        body["runPolicy"] = run_policy
    return _manifest("MXJob", "kubeflow.org/v1", prefix, body)


def caffe2job(prefix: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _manifest("Caffe2Job", "kubeflow.org/v1alpha1", prefix, spec)


# --- observing ----------------------------------------------------------------------------------
def until(fn, what: str, timeout: float = TIMEOUT, interval: float = 0.5):
    """Poll ``fn`` (returning ``(done, value)``) until done; return the value."""
    deadline = time.monotonic() + timeout
    while True:
        done, value = fn()
        if done:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {value!r}")
        time.sleep(interval)


def current(status: dict[str, Any]) -> str:
    """The job's state: the type of its last condition (the State column)."""
    conditions = status.get("conditions") or []
    return conditions[-1]["type"] if conditions else ""


def find(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)


def brief(status: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Conditions without their times, as upstream compares them (IgnoreJobConditionsTimes)."""
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in status.get("conditions") or []]


def counts_match(status: dict[str, Any], expected: dict[str, dict[str, int]]) -> bool:
    replicas = status.get("replicaStatuses") or {}
    return all(
        (replicas.get(rtype) or {}).get(key, 0) == value
        for rtype, want in expected.items()
        for key, value in want.items()
    )


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def pod_started(pod: dict[str, Any]) -> datetime | None:
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        running = (s.get("state") or {}).get("running")
        if running and running.get("startedAt"):
            return ts(running["startedAt"])
    return None


def restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])


def env_of(pod: dict[str, Any], container: str) -> list[dict[str, Any]]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return c.get("env") or []
    raise AssertionError(f"no container {container} in {pod['metadata']['name']}")


def env_value(pod: dict[str, Any], container: str, name: str) -> str | None:
    return next((e.get("value") for e in env_of(pod, container) if e["name"] == name), None)


def tf_config(job: str, cluster: dict[str, int], task_type: str, index: int) -> str:
    """TF_CONFIG as training-operator writes it (Go's encoding/json: map keys sorted)."""
    hosts = {t: [f"{job}-{t}-{i}.{NS}.svc:2222" for i in range(n)] for t, n in sorted(cluster.items())}
    value = {"cluster": hosts, "task": {"type": task_type, "index": index}, "environment": "cloud"}
    return json.dumps(value, separators=(",", ":"))


class Job:
    """One job on the cluster, seen through kubectl."""

    def __init__(self, manifest: dict[str, Any]):
        self.manifest = manifest
        self.kind = manifest["kind"]
        self.name = manifest["metadata"]["name"]
        self.resource = RESOURCES[self.kind]
        # UIDs of the pods whose fate was given, by name suffix ("worker-0").
        self.uids: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"{self.kind}/{self.name}"

    def get(self) -> dict[str, Any] | None:
        result = kubectl("get", self.resource, "-n", NS, self.name, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def status(self) -> dict[str, Any]:
        return (self.get() or {}).get("status") or {}

    def wait(self, pred, what: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Wait until ``pred(status)``; return that status."""

        def check():
            status = self.status()
            return bool(pred(status)), status

        return until(check, f"{self}: {what}", timeout)

    def wait_state(self, *states: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        return self.wait(lambda s: current(s) in states, f"state in {states}", timeout)

    def wait_finished(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        return self.wait_state(*FINISHED, timeout=timeout)

    def wait_counts(self, timeout: float = TIMEOUT, **expected: dict[str, int]) -> dict[str, Any]:
        return self.wait(lambda s: counts_match(s, expected), f"replicaStatuses {expected}", timeout)

    def selector(self) -> str:
        if self.kind == "Caffe2Job":
            return f"caffe2_job_key={NS}-{self.name}"
        return f"training.kubeflow.org/job-name={self.name}"

    def _list(self, kind: str) -> dict[str, dict[str, Any]]:
        items = json.loads(kubectl("get", kind, "-n", NS, "-l", self.selector(), "-o", "json").stdout)
        return {o["metadata"]["name"]: o for o in items["items"]}

    def pods(self) -> dict[str, dict[str, Any]]:
        return self._list("pods")

    def services(self) -> dict[str, dict[str, Any]]:
        return self._list("services")

    def suffixes(self, objects: dict[str, Any]) -> set[str]:
        return {n.removeprefix(f"{self.name}-") for n in objects}

    def pod(self, suffix: str) -> dict[str, Any] | None:
        result = kubectl("get", "pod", "-n", NS, f"{self.name}-{suffix}", "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def wait_pod(self, suffix: str, pred, what: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        def check():
            p = self.pod(suffix)
            return bool(p and pred(p)), p

        return until(check, f"{self.name}-{suffix}: {what}", timeout)

    def annotate(self, suffixes: list[str], annotations: dict[str, str]) -> None:
        names = [f"{self.name}-{s}" for s in suffixes]
        kubectl(
            "annotate", "pod", "-n", NS, "--overwrite", *names, *[f"{k}={v}" for k, v in annotations.items()]
        )

    def patch(self, patch: dict[str, Any]) -> None:
        kubectl("patch", self.resource, "-n", NS, self.name, "--type=merge", "-p", json.dumps(patch))

    def events(self) -> list[dict[str, Any]]:
        result = kubectl(
            "get", "events", "-n", NS, "--field-selector", f"involvedObject.name={self.name}", "-o", "json"
        )
        return json.loads(result.stdout)["items"]

    def reasons(self) -> set[str]:
        return {e["reason"] for e in self.events()}

    def delete(self) -> None:
        kubectl("delete", self.resource, "-n", NS, self.name, "--wait=false", check=False)


def reached_job(job: Job, part: str) -> None:
    """Wait until the job's pod signature (written by the operator's companion, which wakes the
    job) shows ``part`` (e.g. ``Failed=4``), then give that wake-up's pass a moment."""
    until(
        lambda: (
            part
            in (sig := ((job.get() or {}).get("metadata", {}).get("annotations") or {}).get(SIGNATURE, "")),
            sig,
        ),
        f"{job}: pods {part} reach the job",
    )
    time.sleep(1.5)


def no_running_true(status: dict[str, Any]) -> None:
    """status_test.go's filterOutConditionTest: a finished job has no Running=True condition."""
    running = find(status, "Running")
    assert running is None or running["status"] == "False", status["conditions"]


def owned_by(obj: dict[str, Any], job: Job, uid: str) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(
        r["kind"] == job.kind
        and r["apiVersion"] == job.manifest["apiVersion"]
        and r["name"] == job.name
        and r["uid"] == uid
        and r.get("controller")
        for r in refs
    )


# --- launching a section ---------------------------------------------------------------------
@dataclass
class Scenario:
    manifest: dict[str, Any]
    # Pod name suffix ("worker-0") -> annotations given to that pod once it exists.
    fates: dict[str, dict[str, str]] = field(default_factory=dict)


def launch(scenarios: dict[str, Scenario]) -> dict[str, Job]:
    """Create every scenario's job in one request, then give the pods their fates."""
    jobs = {key: Job(s.manifest) for key, s in scenarios.items()}
    items = [s.manifest for s in scenarios.values()]
    kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    waiting = {
        f"{jobs[key].name}-{suffix}": (jobs[key], suffix, given)
        for key, s in scenarios.items()
        for suffix, given in s.fates.items()
    }
    deadline = time.monotonic() + TIMEOUT
    while waiting:
        listed = kubectl(
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{"\\n"}{end}',
        ).stdout
        present = dict(line.split() for line in listed.splitlines() if line.strip())
        groups: dict[tuple, list[str]] = defaultdict(list)
        for name, (job, suffix, given) in list(waiting.items()):
            if name in present:
                job.uids[suffix] = present[name]
                groups[tuple(sorted(given.items()))].append(name)
                del waiting[name]
        for given, names in groups.items():
            kubectl("annotate", "pod", "-n", NS, "--overwrite", *names, *[f"{k}={v}" for k, v in given])
        if waiting:
            assert time.monotonic() < deadline, f"pods never created: {sorted(waiting)}"
            time.sleep(0.5)
    return jobs


# Section builders by test class, in file order: each returns its scenarios by key.
SECTIONS: dict[str, Callable[[], dict[str, Scenario]]] = {}
_LAUNCHES: dict[str, Future] = {}
_POOL = ThreadPoolExecutor(max_workers=2)


def _start(name: str) -> Future:
    if name not in _LAUNCHES:
        _LAUNCHES[name] = _POOL.submit(lambda: launch(SECTIONS[name]()))
    return _LAUNCHES[name]


def section(request):
    """A section's class fixture: its jobs, launched together (and the next selected section's
    launched meanwhile, so that its jobs start while this section's tests run); once the
    section's tests are done every job left of it is deleted (tests delete their own job when
    done; this catches shared and failed ones)."""
    name = request.cls.__name__
    future = _start(name)
    selected = []
    for item in request.session.items:
        cls = getattr(item, "cls", None)
        if cls is not None and cls.__name__ in SECTIONS and cls.__name__ not in selected:
            selected.append(cls.__name__)
    following = selected[selected.index(name) + 1 :] if name in selected else []
    if following:
        _start(following[0])
    jobs = future.result()
    yield jobs
    by_resource: dict[str, list[str]] = defaultdict(list)
    for job in jobs.values():
        by_resource[job.resource].append(job.name)
    for resource, names in by_resource.items():
        kubectl("delete", resource, "-n", NS, *names, "--wait=false", "--ignore-not-found", check=False)


def created_or_refused(manifest: dict[str, Any], *flags: str):
    return kubectl("create", *flags, "-f", "-", stdin=json.dumps(manifest), check=False)


# =============================================================================================
# B.1 training-operator pkg/controller.v1/tensorflow/status_test.go
# =============================================================================================
@dataclass
class Row:
    desc: str
    specs: dict[str, Any]
    expected: str
    fates: dict[str, dict[str, str]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)


ALL_WORKERS = {"successPolicy": "AllWorkers"}

STATUS_ROWS = [
    Row(
        "Chief worker is succeeded",
        {"Chief": rep(1, ok("2s")), "Worker": rep(1, ok())},
        "Succeeded",
        counts={"Chief": {"succeeded": 1}, "Worker": {"succeeded": 1}},
    ),
    Row(
        "Chief worker is running",
        {"Chief": rep(1), "Worker": rep(1, PENDING)},
        "Running",
        counts={"Chief": {"active": 1}, "Worker": {"active": 0}},
    ),
    Row("Chief worker is failed", {"Chief": rep(1, fail()), "Worker": rep(1, PENDING)}, "Failed"),
    Row("(No chief worker) Worker is failed", {"Worker": rep(1, fail())}, "Failed"),
    Row(
        "(No chief worker) Worker is succeeded",
        {"Worker": rep(1, ok())},
        "Succeeded",
        counts={"Worker": {"succeeded": 1}},
    ),
    Row(
        "(No chief worker) Worker is running", {"Worker": rep(1)}, "Running", counts={"Worker": {"active": 1}}
    ),
    # Upstream's "succeeded" pods are worker-0 and worker-1 but carry no exit code, so worker-0
    # does not count as completed; black-box a Succeeded pod always has one: workers 1 and 2.
    Row(
        "(No chief worker) 2 workers are succeeded, 2 workers are active",
        {"PS": rep(2), "Worker": rep(4)},
        "Running",
        fates={"worker-1": ok(), "worker-2": ok()},
        counts={"Worker": {"succeeded": 2, "active": 2}, "PS": {"active": 2}},
    ),
    Row(
        "(No chief worker) 2 workers are running, 2 workers are failed",
        {"PS": rep(2), "Worker": rep(4)},
        "Failed",
        fates={"worker-2": fail(), "worker-3": fail()},
    ),
    Row(
        "(No chief worker) 2 workers are succeeded, 2 workers are failed",
        {"PS": rep(2), "Worker": rep(4)},
        "Failed",
        fates={"worker-1": ok(), "worker-2": ok(), "worker-0": fail(1, "3s"), "worker-3": fail(1, "3s")},
    ),
    Row(
        "(No chief worker) worker-0 are succeeded, 3 workers are active",
        {"PS": rep(2), "Worker": rep(4)},
        "Succeeded",
        fates={"worker-0": ok()},
        # Once the job succeeded, active replicas are reported succeeded (upstream's rule).
        counts={"Worker": {"succeeded": 4, "active": 0}, "PS": {"succeeded": 2, "active": 0}},
    ),
    Row(
        "(No chief worker, successPolicy: AllWorkers) worker-0 are succeeded, 3 workers are active",
        {"Worker": rep(4)},
        "Running",
        fates={"worker-0": ok()},
        counts={"Worker": {"succeeded": 1, "active": 3}},
        spec=ALL_WORKERS,
    ),
    Row(
        "(No chief worker, successPolicy: AllWorkers) 4 workers are succeeded",
        {"Worker": rep(4, ok())},
        "Succeeded",
        counts={"Worker": {"succeeded": 4}},
        spec=ALL_WORKERS,
    ),
    Row(
        "(No chief worker, successPolicy: AllWorkers) worker-0 is succeeded, 2 workers are running, "
        "1 worker is failed",
        {"Worker": rep(4)},
        "Failed",
        fates={"worker-0": ok(), "worker-1": fail(1, "3s")},
        spec=ALL_WORKERS,
    ),
    Row(
        "Chief is running, workers are succeeded",
        {"Chief": rep(1), "PS": rep(2), "Worker": rep(4, ok())},
        "Running",
        counts={"Worker": {"succeeded": 4}, "Chief": {"active": 1}},
    ),
    Row(
        "Chief is running, a PS is failed",
        {"Chief": rep(1), "PS": rep(2), "Worker": rep(4, ok())},
        "Failed",
        fates={"ps-0": fail(1, "3s")},
    ),
    Row(
        "Chief is failed, workers are succeeded",
        {"Chief": rep(1, fail(1, "4s")), "PS": rep(2), "Worker": rep(4, ok())},
        "Failed",
    ),
]

ROW14 = "Chief is running, workers are failed"
ROW18 = "Chief is succeeded, workers are failed"
ROW19 = "Chief is failed and restarting"
TEST_FAILED = "should update TFJob with failed status"


def judge(job: Job, expected: str, counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Wait for a row's verdict: a finished state, or the counts a Running verdict is about."""
    if expected in FINISHED:
        status = job.wait_finished()
        assert current(status) == expected, brief(status)
        no_running_true(status)
        assert counts_match(status, counts), status.get("replicaStatuses")
    else:
        status = job.wait(lambda s: counts_match(s, counts) or current(s) in FINISHED, f"counts {counts}")
        assert current(status) == expected, brief(status)
    return status


def _tf_status_scenarios() -> dict[str, Scenario]:
    scenarios = {row.desc: Scenario(tfjob("st", row.specs, **row.spec), row.fates) for row in STATUS_ROWS}
    scenarios[ROW14] = Scenario(tfjob("st", {"Chief": rep(1), "PS": rep(2), "Worker": rep(4, fail())}))
    scenarios[ROW18] = Scenario(
        tfjob("st", {"Chief": rep(1, ok()), "PS": rep(2), "Worker": rep(4, fail(1, "6s"))})
    )
    # Row 19's fates are given by its test, so that the transient Restarting state is watched.
    exit_code = {t: rep(n, policy="ExitCode") for t, n in (("Chief", 1), ("PS", 2), ("Worker", 4))}
    scenarios[ROW19] = Scenario(tfjob("st", exit_code))
    scenarios[TEST_FAILED] = Scenario(tfjob("st", {"Worker": rep(3)}), {"worker-2": fail()})
    return scenarios


SECTIONS["TestTensorflowStatusTest"] = _tf_status_scenarios


class TestTensorflowStatusTest:
    """training-operator v1.9.0 pkg/controller.v1/tensorflow/status_test.go"""

    @pytest.fixture(scope="class")
    @classmethod
    def tf_status(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("row", STATUS_ROWS, ids=lambda r: r.desc)
    def test_status(self, tf_status, row):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/status_test.go, Context "Test Status" /
        It "should update TFJob with desired status": one row each (id = the row's description).

        Upstream sets pod phases and counters and checks that a condition of the expected type exists
        and that a finished job has no Running=True condition; here the pods really end that way
        and the job's current state (last condition) must be the expected one. Upstream's replicas
        have restartPolicy "" (the fixture defaults before adding them); ours are Never, the
        default, which behaves the same for these rows."""
        job = tf_status[row.desc]
        judge(job, row.expected, row.counts)
        job.delete()

    def test_status_chief_is_running_workers_are_failed(self, tf_status):
        """status_test.go, Context "Test Status", row "Chief is running, workers are failed":
        NewTFJobWithChief(4, 2), Worker 4 failed, Chief running, expected condition Running.

        Deliberate difference: upstream's row passes only because its test checks that a Running
        condition exists (its job is in fact marked Failed as well, Running kept with status
        False). Failed workers under restartPolicy Never fail the job here: the job is Failed, and
        its Running condition, if any, is False."""
        job = tf_status[ROW14]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert re.fullmatch(
            rf"TFJob {NS}/{job.name} has failed because \d Worker replica\(s\) failed\.",
            find(status, "Failed")["message"],
        )
        no_running_true(status)
        job.delete()

    def test_status_chief_is_succeeded_workers_are_failed(self, tf_status):
        """status_test.go, Context "Test Status", row "Chief is succeeded, workers are failed":
        NewTFJobWithChief(4, 2), Chief succeeded, Worker 4 failed, expected condition Succeeded.

        Deliberate difference: upstream ends this row with both Succeeded and Failed conditions
        (setCondition only freezes after Failed); a job here is never both. The chief succeeds
        first, then the four workers fail: the job stays Succeeded with no Failed condition."""
        job = tf_status[ROW18]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        reached_job(job, "Failed=4")  # the workers fail afterwards
        reconcile_finished(job.resource, NS, job.name)  # a pass that sees them
        status = job.status()
        assert current(status) == "Succeeded", brief(status)
        assert find(status, "Failed") is None, brief(status)
        no_running_true(status)
        job.delete()

    def test_status_chief_is_failed_and_restarting(self, tf_status):
        """status_test.go, Context "Test Status", row "Chief is failed and restarting":
        NewTFJobWithChief(4, 2), every replica restartPolicy ExitCode, Chief and the 4 workers
        failed with exit code 130 ("130 is a retryable code"), expected condition Restarting.

        The failed pods are deleted and recreated: the job is Restarting (reason TFJobRestarting),
        never Failed, and Running again once the replacements run; each recreation counts in
        status.restartCount."""
        job = tf_status[ROW19]
        job.wait_counts(Chief={"active": 1}, Worker={"active": 4}, PS={"active": 2})
        failing = ["chief-0", "worker-0", "worker-1", "worker-2", "worker-3"]
        before = {s: job.pod(s)["metadata"]["uid"] for s in failing}
        # Restarting is transient (Running replaces it): a watch sees it however busy the machine.
        watch = Watch(job.resource, job.name, NS)
        job.annotate(failing, fail(130))
        status = job.wait(
            lambda s: current(s) == "Running" and s.get("restartCount") == 5, "Running again after 5 restarts"
        )
        seen = [o.get("status") or {} for _, o in watch.events()]
        restarting = [find(s, "Restarting") for s in seen if current(s) == "Restarting"]
        assert restarting, [brief(s) for s in seen]
        assert (restarting[0]["status"], restarting[0]["reason"]) == ("True", "TFJobRestarting")
        assert find(status, "Failed") is None
        assert all(job.pod(s)["metadata"]["uid"] != uid for s, uid in before.items())
        assert {"TFJobRestarting", "ExitedWithCode"} <= job.reasons()
        job.delete()

    def test_failed_should_update_tfjob_with_failed_status(self, tf_status):
        """status_test.go, Context "Test Failed" / It "should update TFJob with failed status":
        NewTFJob(3, 0), one Worker pod Failed -> ReplicaStatuses[Worker].Failed == 1 and a Failed
        condition."""
        job = tf_status[TEST_FAILED]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert status["replicaStatuses"]["Worker"]["failed"] == 1
        job.delete()


# =============================================================================================
# B.6b kubeflow/mxnet-operator pkg/controller.v1beta1/mxnet/status_test.go
# =============================================================================================
# NewMXJobWithSuccessPolicy(scheduler, worker, server, policy); rows' counts are (f/s/a).
MX_ROWS = [
    Row("Worker is failed", {"Worker": mxrep(1, fail())}, "Failed"),
    Row("Worker is succeeded", {"Scheduler": mxrep(1, ok("2s")), "Worker": mxrep(1, ok())}, "Succeeded"),
    Row(
        "Worker is running",
        {"Scheduler": mxrep(1), "Worker": mxrep(1)},
        "Running",
        counts={"Scheduler": {"active": 1}, "Worker": {"active": 1}},
    ),
    Row(
        "2 workers are succeeded, 2 workers are active",
        {"Scheduler": mxrep(1), "Worker": mxrep(4)},
        "Running",
        fates={"worker-0": ok(), "worker-1": ok()},
        counts={"Worker": {"succeeded": 2, "active": 2}},
    ),
    Row(
        "2 workers are running, 2 workers are failed",
        {"Scheduler": mxrep(1), "Worker": mxrep(4)},
        "Failed",
        fates={"worker-2": fail(), "worker-3": fail()},
    ),
    Row(
        "2 workers are succeeded, 2 workers are failed",
        {"Scheduler": mxrep(1), "Worker": mxrep(4)},
        "Failed",
        fates={"worker-0": ok(), "worker-1": ok(), "worker-2": fail(1, "3s"), "worker-3": fail(1, "3s")},
    ),
    Row(
        "Worker is running, successPolicy sets to AllWorkers",
        {"Scheduler": mxrep(1), "Worker": mxrep(1)},
        "Running",
        counts={"Scheduler": {"active": 1}, "Worker": {"active": 1}},
    ),
]
MX_ROW7 = "Worker is succeeded, successPolicy sets to AllWorkers"
MX_ROW9 = "Scheduler is succeeded, worker is running, successPolicy sets to AllWorkers"
MX_FAILED = "TestFailed"


def _mx_status_scenarios() -> dict[str, Scenario]:
    scenarios = {row.desc: Scenario(mxjob("mxst", row.specs), row.fates) for row in MX_ROWS}
    scenarios[MX_ROW7] = Scenario(
        mxjob("mxst", {"Scheduler": mxrep(1), "Worker": mxrep(1, ok())}),
    )
    scenarios[MX_ROW9] = Scenario(mxjob("mxst", {"Scheduler": mxrep(1, ok()), "Worker": mxrep(1)}))
    scenarios[MX_FAILED] = Scenario(
        mxjob("mxst", {"Scheduler": mxrep(1), "Worker": mxrep(3)}), {"worker-1": fail()}
    )
    return scenarios


SECTIONS["TestMxnetStatusTest"] = _mx_status_scenarios


class TestMxnetStatusTest:
    """kubeflow/mxnet-operator pkg/controller.v1beta1/mxnet/status_test.go"""

    @pytest.fixture(scope="class")
    @classmethod
    def mx_status(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("row", MX_ROWS, ids=lambda r: r.desc)
    def test_mxjob_status(self, mx_status, row):
        """kubeflow/mxnet-operator pkg/controller.v1beta1/mxnet/status_test.go, TestStatus: one row
        each (id = the row's description). Upstream checks a condition of the expected type exists
        (and filterOutConditionTest); here the job's current state must be it. The Scheduler runs
        under this operator's default for it, ExitCode; the rows' exits are 0 or 1 either way."""
        job = mx_status[row.desc]
        judge(job, row.expected, row.counts)
        job.delete()

    def test_mxjob_status_worker_is_succeeded_success_policy_all_workers(self, mx_status):
        """mxnet-operator status_test.go (v1beta1), TestStatus row "Worker is succeeded,
        successPolicy sets to AllWorkers": NewMXJobWithSuccessPolicy(1, 1, 0, AllWorkers), Scheduler
        active, the Worker succeeded, expected Succeeded.

        Deliberate difference: the MXJob v1 API (training-operator, mxnet-operator v1) has no
        successPolicy; the Scheduler's success is the job's. With the Scheduler still running the
        job is Running."""
        job = mx_status[MX_ROW7]
        status = job.wait(
            lambda s: (
                counts_match(s, {"Worker": {"succeeded": 1}, "Scheduler": {"active": 1}})
                or current(s) in FINISHED
            ),
            "the worker's success observed",
        )
        assert current(status) == "Running", brief(status)
        job.delete()

    def test_mxjob_status_scheduler_is_succeeded_worker_is_running_success_policy_all_workers(
        self, mx_status
    ):
        """mxnet-operator status_test.go (v1beta1), TestStatus row "Scheduler is succeeded, worker is
        running, successPolicy sets to AllWorkers": NewMXJobWithSuccessPolicy(1, 1, 0, AllWorkers),
        expected Running.

        Deliberate difference: MXJob v1 has no successPolicy; the Scheduler decides the job (as in
        training-operator v1.8 and mxnet-operator v1): its success makes the job Succeeded."""
        job = mx_status[MX_ROW9]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        assert find(status, "Succeeded")["message"] == f"MXJob {job.name} is successfully completed."
        no_running_true(status)
        job.delete()

    def test_mxjob_failed(self, mx_status):
        """mxnet-operator status_test.go (v1beta1), TestFailed: NewMXJob(3, 0), one Worker pod Failed ->
        Worker Failed == 1 and a Failed condition.

        Deliberate difference: three workers make a distributed MXTrain job, which must have a
        Scheduler here (refused at creation otherwise); the job has one, left running."""
        job = mx_status[MX_FAILED]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert status["replicaStatuses"]["Worker"]["failed"] == 1
        assert (
            find(status, "Failed")["message"]
            == f"mxjob {job.name} is failed because 1 Worker replica(s) failed."
        )
        job.delete()


# =============================================================================================
# B.2 training-operator pkg/controller.v1/common/job_test.go and tensorflow/job_test.go
# =============================================================================================
@dataclass
class CleanRow:
    desc: str
    specs: dict[str, Any]
    policy: str
    remain: set[str]  # pods (and same-name services) left at the end
    suspend: bool = False
    state: str = "Succeeded"


DELETE_PODS_AND_SERVICES = [
    CleanRow(
        "Succeeded job and cleanPodPolicy is Running",
        {"Chief": rep(1, ok("2s")), "Worker": rep(1)},
        "Running",
        {"chief-0"},
    ),
    CleanRow(
        "Suspended job and cleanPodPolicy is Running",
        {"Chief": rep(1), "Worker": rep(1, ok())},
        "Running",
        set(),
        suspend=True,
    ),
    CleanRow(
        "Finished job and cleanPodPolicy is All", {"Chief": rep(1, ok("2s")), "Worker": rep(1)}, "All", set()
    ),
    CleanRow(
        "Finished job and cleanPodPolicy is None",
        {"Chief": rep(1, fail(1, "3s")), "PS": rep(1), "Worker": rep(1, ok())},
        "None",
        {"chief-0", "ps-0", "worker-0"},
        state="Failed",
    ),
    CleanRow(
        "Suspended job and cleanPodPolicy is None",
        {"Chief": rep(1), "Worker": rep(1, ok())},
        "None",
        set(),
        suspend=True,
    ),
]

# tensorflow/job_test.go "Test Delete Pods and Services": the job is marked Succeeded while its
# 4 workers and 2 PS are still running (or have succeeded). Black-box a Chief decides that.
TF_DELETE_PODS_AND_SERVICES = [
    CleanRow(
        "4 workers and 2 ps is running, policy is all",
        {"Chief": rep(1, ok()), "PS": rep(2), "Worker": rep(4)},
        "All",
        set(),
    ),
    CleanRow(
        "4 workers and 2 ps is running, policy is running",
        {"Chief": rep(1, ok()), "PS": rep(2), "Worker": rep(4)},
        "Running",
        {"chief-0"},
    ),
    CleanRow(
        "4 workers and 2 ps is succeeded, policy is running",
        {"Chief": rep(1, ok("6s")), "PS": rep(2, ok()), "Worker": rep(4, ok())},
        "Running",
        {"chief-0", "ps-0", "ps-1", "worker-0", "worker-1", "worker-2", "worker-3"},
    ),
    CleanRow(
        "4 workers and 2 ps is succeeded, policy is None",
        {"Chief": rep(1, ok("6s")), "PS": rep(2, ok()), "Worker": rep(4, ok())},
        "None",
        {"chief-0", "ps-0", "ps-1", "worker-0", "worker-1", "worker-2", "worker-3"},
    ),
]

BACKOFF_0 = "backOffLimit is 0"
BACKOFF_3 = "backOffLimit is 3"
DEADLINE_0 = "activeDeadlineSeconds is 0"
DEADLINE_2 = "activeDeadlineSeconds is 2"
MANAGED_BY_RUN = {
    "managedBy is nil": None,
    "managedBy is training-operator controller": "kubeflow.org/training-operator",
}
MANAGED_BY_EXTERNAL = "managedBy is not the training-operator controller"
MANAGED_BY_REFUSED = {"managedBy is empty": "", "managedBy is other value": "other-job-controller"}

ADD_TFJOB = "should get the exact TFJob"
ADD_DECOY = "decoy-case-34"
COPY_LABELS = "should copy labels and annotation from the spec to generated Pods"
DEADLINE_ROWS = {
    "4 workers and 2 ps is running, ActiveDeadlineSeconds unset": None,
    "4 workers and 2 ps is running, ActiveDeadlineSeconds is 2": 2,
}
BACKOFF_ON_FAILURE = "4 workers each having 1 restartCount and 2 ps is running, backoffLimit 4 "
# The pod's fate is given by the test: a job that finished earlier would be gone already.
TTL_ROWS = {"succeeded job with TTL 3s": ok(), "failed job with TTL 3s": fail()}
CLEANUP_ROWS = [
    "TFJob shouldn't be removed since TTL is nil",
    "No error with completionTime is nil if suspended",
    "No error with TTL is set and completionTime is nil, if suspended",
    "Error is occurred since completionTime is nil",
    "TFJob is removed since exceeded TTL (TTL is 180s)",
    "TFJob is removed since (TTL is 0s)",
]
CREATE_SERVICE_ROWS = [
    "Failed to create service since containerPort is missing",
    "Failed to create service since Job's ownerReference is invalid",
    "Succeeded to create service",
]


def _cleanup_job(desc: str) -> dict[str, Any]:
    """NewTFJobWithCleanupJobDelay(1, 2, 0, ttl): 1 worker, 2 PS, cleanPodPolicy None."""
    ttl, suspend, fate = {
        CLEANUP_ROWS[0]: (None, False, ok()),
        CLEANUP_ROWS[1]: (None, True, None),
        # Upstream's 10 s; 0 here, the strictest value that must still keep the job.
        CLEANUP_ROWS[2]: (0, True, None),
        CLEANUP_ROWS[3]: (0, False, None),
        CLEANUP_ROWS[4]: (180, False, None),  # finished by the test: 180 s could pass before it
        CLEANUP_ROWS[5]: (0, False, ok()),
    }[desc]
    policy: dict[str, Any] = {"cleanPodPolicy": "None"}
    if ttl is not None:
        policy["ttlSecondsAfterFinished"] = ttl
    if suspend:
        policy["suspend"] = True
    return tfjob("cl", {"PS": rep(2), "Worker": rep(1, fate)}, policy)


def _clean_row(job: Job, row: CleanRow) -> None:
    if row.suspend:
        job.wait_counts(Worker={"succeeded": 1}, Chief={"active": 1})
        job.patch({"spec": {"runPolicy": {"suspend": True}}})
        job.wait_state("Suspended")
    else:
        status = job.wait_finished()
        assert current(status) == row.state, brief(status)
    until(
        lambda: (
            (got := (job.suffixes(job.pods()), job.suffixes(job.services()))) == (row.remain, row.remain),
            got,
        ),
        f"pods and services left: {sorted(row.remain)}",
    )
    time.sleep(1)  # nothing else goes
    assert (job.suffixes(job.pods()), job.suffixes(job.services())) == (row.remain, row.remain)
    job.delete()


def _job_tests_scenarios() -> dict[str, Scenario]:
    s: dict[str, Scenario] = {}
    for row in DELETE_PODS_AND_SERVICES:
        s[row.desc] = Scenario(tfjob("dps", row.specs, {"cleanPodPolicy": row.policy}))
    # TestPastBackoffLimit: a replica "test" with restartPolicy OnFailure; a Chief keeps the
    # job from succeeding on worker-0 alone.
    s[BACKOFF_0] = Scenario(
        tfjob("pbl", {"Chief": rep(1), "Worker": rep(2, policy="OnFailure")}, {"backoffLimit": 0}),
        {"worker-1": ok()},
    )
    s[BACKOFF_3] = Scenario(
        tfjob("pbl", {"Chief": rep(1), "Worker": rep(3, policy="OnFailure")}, {"backoffLimit": 3}),
        {"worker-1": ok(), "worker-2": fail(1, "1s")},
    )
    s[DEADLINE_0] = Scenario(tfjob("pad", {"Worker": rep(1)}, {"activeDeadlineSeconds": 0}))
    s[DEADLINE_2] = Scenario(tfjob("pad", {"Worker": rep(1)}, {"activeDeadlineSeconds": 2}))
    for desc, manager in MANAGED_BY_RUN.items():
        s[desc] = Scenario(tfjob("mb", {"Worker": rep(1)}, {"managedBy": manager} if manager else None))
    s[MANAGED_BY_EXTERNAL] = Scenario(
        tfjob("mb", {"Worker": rep(1)}, {"managedBy": "kueue.x-k8s.io/multikueue"})
    )
    # tensorflow/job_test.go
    s[ADD_TFJOB] = Scenario(tfjob("test-case-12", {"PS": rep(3, PENDING), "Worker": rep(2, PENDING)}))
    s[ADD_DECOY] = Scenario(tfjob("decoy-case-34", {"PS": rep(3, PENDING), "Worker": rep(2, PENDING)}))
    s[COPY_LABELS] = Scenario(
        tfjob("cla", {"Worker": rep(1, labels={"label1": "1"}, annotations={"annotation1": "1"})})
    )
    for row in TF_DELETE_PODS_AND_SERVICES:
        s[row.desc] = Scenario(tfjob("tdps", row.specs, {"cleanPodPolicy": row.policy}))
    for desc, seconds in DEADLINE_ROWS.items():
        policy = {"cleanPodPolicy": "All"}
        if seconds is not None:
            policy["activeDeadlineSeconds"] = seconds
        s[desc] = Scenario(tfjob("ads", {"PS": rep(2), "Worker": rep(4)}, policy))
    s[BACKOFF_ON_FAILURE] = Scenario(
        tfjob(
            "bof",
            {"PS": rep(2), "Worker": rep(4, fail(1, "3s"), policy="OnFailure")},
            {"backoffLimit": 4, "cleanPodPolicy": "All"},
        )
    )
    for desc in TTL_ROWS:  # the pod's fate is given by the test: the job would be gone before it
        policy = {"ttlSecondsAfterFinished": 3, "cleanPodPolicy": "None"}
        s[desc] = Scenario(tfjob("ttl", {"Worker": rep(1)}, policy))
    for desc in CLEANUP_ROWS:
        s[desc] = Scenario(_cleanup_job(desc))
    # NewTFJobV2(2, 0, 0, 1, 0): 2 workers and a chief; the worker container has no port.
    s["CreateNewService"] = Scenario(tfjob("cns", {"Chief": rep(1), "Worker": rep(2)}))
    return s


SECTIONS["TestJobTest"] = _job_tests_scenarios


class TestJobTest:
    """training-operator v1.9.0 pkg/controller.v1/common/job_test.go and tensorflow/job_test.go"""

    @pytest.fixture(scope="class")
    @classmethod
    def job_tests(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("row", DELETE_PODS_AND_SERVICES, ids=lambda r: r.desc)
    def test_delete_pods_and_services(self, job_tests, row):
        """training-operator v1.9.0 pkg/controller.v1/common/job_test.go, TestDeletePodsAndServices:
        one row each. A running pod and a succeeded pod, each with a same-name service; after the
        job finished (or was suspended) the listed pods and services remain.

        Black-box the job finishes through its pods (a Chief decides it, so that another pod can
        still be running); "Finished job ... None" is a Failed job, failed by its Chief."""
        _clean_row(job_tests[row.desc], row)

    def test_past_backoff_limit_backofflimit_is_0(self, job_tests):
        """common/job_test.go, TestPastBackoffLimit, "backOffLimit is 0": replica restartPolicy
        OnFailure, a running and a succeeded pod, no restarts -> not past the limit (the job goes
        on)."""
        job = job_tests[BACKOFF_0]
        status = job.wait(
            lambda s: counts_match(s, {"Worker": {"succeeded": 1, "active": 1}}) or current(s) in FINISHED,
            "worker-1 succeeded, worker-0 running",
        )
        time.sleep(1)
        status = job.status()
        assert current(status) == "Running", brief(status)
        job.delete()

    def test_past_backoff_limit_backofflimit_is_3(self, job_tests):
        """common/job_test.go, TestPastBackoffLimit, "backOffLimit is 3": replica restartPolicy
        OnFailure, a running pod, a succeeded pod and a running pod whose container restarted 3
        times -> past the limit: the job fails with upstream's backoff message."""
        job = job_tests[BACKOFF_3]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert (
            find(status, "Failed")["message"]
            == f"Job {job.name} has failed because it has reached the specified backoff limit"
        )
        job.delete()

    def test_past_active_deadline_active_deadline_seconds_is_0(self, job_tests):
        """common/job_test.go, TestPastActiveDeadline, "activeDeadlineSeconds is 0" (StartTime now) ->
        past: the job fails at once with upstream's deadline message."""
        job = job_tests[DEADLINE_0]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert (
            find(status, "Failed")["message"]
            == f"Job {job.name} has failed because it was active longer than specified deadline"
        )
        assert (ts(status["completionTime"]) - ts(status["startTime"])).total_seconds() <= 2
        job.delete()

    def test_past_active_deadline_active_deadline_seconds_is_2(self, job_tests):
        """common/job_test.go, TestPastActiveDeadline, "activeDeadlineSeconds is 2" (StartTime now) ->
        not past yet. Black-box: the job is not failed before 2 s have passed since its startTime,
        and is failed by the deadline after them."""
        job = job_tests[DEADLINE_2]
        status = job.wait_finished()
        assert "deadline" in find(status, "Failed")["message"]
        assert (ts(status["completionTime"]) - ts(status["startTime"])).total_seconds() >= 2
        job.delete()

    @pytest.mark.parametrize("desc", list(MANAGED_BY_RUN))
    def test_managed_by_external_controller_runs_the_job(self, job_tests, desc):
        """common/job_test.go, TestManagedByExternalController, rows "managedBy is nil" and "managedBy
        is training-operator controller" -> not external (nil): this operator runs the job."""
        job = job_tests[desc]
        status = job.wait(lambda s: find(s, "Created") and job.pod("worker-0"), "Created, worker-0 created")
        assert find(status, "Created")["reason"] == "TFJobCreated"
        job.delete()

    def test_managed_by_external_controller_managed_by_is_not_the_training_operator_controller(
        self, job_tests
    ):
        """common/job_test.go, TestManagedByExternalController, "managedBy is not the training-operator
        controller" (kueue.x-k8s.io/multikueue) -> external: the job is left alone, no pods and no
        status at all."""
        job = job_tests[MANAGED_BY_EXTERNAL]
        # A job created in the same request (and not deleted before this test) was reconciled.
        job_tests["CreateNewService"].wait(lambda s: find(s, "Created"), "Created")
        time.sleep(2)
        assert not (job.get() or {}).get("status")
        assert job.pods() == {} and job.services() == {}
        job.delete()

    @pytest.mark.parametrize("desc", list(MANAGED_BY_REFUSED))
    def test_managed_by_external_controller_refused(self, desc):
        """common/job_test.go, TestManagedByExternalController, rows "managedBy is empty" (-> upstream's
        controller treats "" as external and skips the job) and "managedBy is other value"
        (other-job-controller -> external).

        Both values are refused at creation, as upstream's webhook refuses them (spec.runPolicy.
        managedBy "Unsupported value"). Deliberate difference for "": upstream's controller alone
        (a cluster without its webhook) would leave such a job unreconciled forever; here the CRD
        schema refuses it even without admission webhooks or policies."""
        manifest = tfjob("mbr", {"Worker": rep(1)}, {"managedBy": MANAGED_BY_REFUSED[desc]})
        result = created_or_refused(manifest)
        assert result.returncode != 0, result.stdout
        assert "managedBy" in result.stderr and "Unsupported value" in result.stderr, result.stderr

    def test_add_tfjob_should_get_the_exact_tfjob(self, job_tests):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/job_test.go, Context "Test Add TFJob" /
        It "should get the exact TFJob": test-case-12 and a decoy-case-34 (2 workers, 3 PS each);
        getting the first returns exactly it."""
        job, decoy = job_tests[ADD_TFJOB], job_tests[ADD_DECOY]
        got = job.get()
        assert got["metadata"]["name"] == job.name
        assert got["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2
        assert got["spec"]["tfReplicaSpecs"]["PS"]["replicas"] == 3
        until(lambda: (len(p := job.pods()) == 5, sorted(p)), "its 5 pods")
        assert set(job.pods()).isdisjoint(decoy.pods())
        job.delete()
        decoy.delete()

    def test_copy_labels_and_annotation(self, job_tests):
        """tensorflow/job_test.go, Context "Test Copy Labels and Annotation" / It "should copy labels
        and annotation from the spec to generated Pods": worker template label label1=1 and
        annotation annotation1=1 are on pod <job>-worker-0."""
        job = job_tests[COPY_LABELS]
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        assert pod["metadata"]["labels"]["label1"] == "1"
        assert pod["metadata"]["annotations"]["annotation1"] == "1"
        job.delete()

    @pytest.mark.parametrize("row", TF_DELETE_PODS_AND_SERVICES, ids=lambda r: r.desc)
    def test_clean_associated_pods_and_services_according_to_clean_policy(self, job_tests, row):
        """tensorflow/job_test.go, Context "Test Delete Pods and Services" / It "it should clean
        associated Pods and Services according to clean policy": one row each; 4 workers and 2 PS
        (running, or succeeded), a job with a Succeeded condition, the pods and services left.

        Upstream writes the Succeeded condition itself; black-box a Chief succeeds (after the
        workers and PS in the "succeeded" rows) and the workers' and PS's pods and services left
        are counted, plus the Chief's own."""
        _clean_row(job_tests[row.desc], row)

    @pytest.mark.parametrize("desc", list(DEADLINE_ROWS))
    def test_active_deadline_seconds(self, job_tests, desc):
        """tensorflow/job_test.go, Context "Test Active Deadline Seconds" / It "clean desired Pods and
        Services according to TFJob config": one row each; 4 workers and 2 PS running, cleanPodPolicy
        All. Unset: all 6 pods and services remain; 2: the job fails by its deadline and none
        remain."""
        job = job_tests[desc]
        if DEADLINE_ROWS[desc] is None:
            job.wait_counts(Worker={"active": 4}, PS={"active": 2})
            time.sleep(1)
            assert current(job.status()) == "Running"
            assert len(job.pods()) == 6 and len(job.services()) == 6
        else:
            status = job.wait_finished()
            assert current(status) == "Failed" and "deadline" in find(status, "Failed")["message"]
            until(lambda: (not (p := job.pods()) and not job.services(), sorted(p)), "everything cleaned")
        job.delete()

    def test_backoff_for_on_failure_4_workers_each_having_1_restart_count(self, job_tests):
        """tensorflow/job_test.go, Context "Test Backoff For On Failure(" / It "clean desired Pods and
        Services according to TFJob config", "4 workers each having 1 restartCount and 2 ps is
        running, backoffLimit 4 ": Worker restartPolicy OnFailure, cleanPodPolicy All -> the job
        fails by the backoff limit and no pod or service remains. The workers' containers restart
        in place (OnFailure, exit 1); the PS (restartPolicy Never here, "" upstream) do not count."""
        job = job_tests[BACKOFF_ON_FAILURE]
        status = job.wait_finished()
        assert current(status) == "Failed", brief(status)
        assert "backoff limit" in find(status, "Failed")["message"]
        until(lambda: (not (p := job.pods()) and not job.services(), sorted(p)), "everything cleaned")
        job.delete()

    @pytest.mark.parametrize("desc", list(TTL_ROWS))
    def test_ttl_seconds_after_finished(self, job_tests, desc):
        """tensorflow/job_test.go, Context "Test TTL Seconds After Finished" / It "should delete job
        when expired time is up": one row each; a finished job with ttlSecondsAfterFinished 3 is
        deleted once it has expired."""
        job = job_tests[desc]
        job.wait_counts(Worker={"active": 1})
        job.annotate(["worker-0"], TTL_ROWS[desc])
        status = job.wait(lambda s: current(s) in FINISHED or not s, "finished")
        assert current(status) == ("Succeeded" if "succeeded" in desc else "Failed")
        done = ts(status["completionTime"])
        until(lambda: (job.get() is None, None), "deleted by its TTL")
        assert (datetime.now(UTC) - done).total_seconds() >= 2  # completionTime has 1 s precision

    @pytest.mark.parametrize("desc", CLEANUP_ROWS)
    def test_tfjob_is_created_and_is_cleaned_up(self, job_tests, desc):
        """tensorflow/job_test.go, Describe "Test for controller.v1/common", DescribeTable "TFJob is
        created and is cleaned up" (CleanupJob), one Entry each; NewTFJobWithCleanupJobDelay(1, 2,
        0, ttl).

        Upstream calls CleanupJob with a made-up status. Here: a finished job without TTL stays; a
        suspended job has no completionTime and stays (with TTL 0 rather than upstream's 10, the
        strictest case); a running job with a TTL has no completionTime and stays (upstream's
        CleanupJob returns an error there, which only its log shows); a job whose completionTime
        is a day old with TTL 180 s (the status is patched so) is deleted; with TTL 0 a job is
        deleted as it finishes."""
        job = job_tests[desc]
        i = CLEANUP_ROWS.index(desc)
        if i == 0:
            job.wait_state("Succeeded")
        elif i in (1, 2):
            job.wait_state("Suspended")
        elif i == 3:
            job.wait_counts(Worker={"active": 1})
        if i <= 3:
            time.sleep(2)
            status = job.status()
            assert status, f"{job} was deleted"
            if i in (1, 2, 3):
                assert "completionTime" not in status
            job.delete()
            return
        if i == 4:
            job.wait_counts(Worker={"active": 1})
            job.annotate(["worker-0"], ok())
            job.wait_state("Succeeded")
            day_old = json.dumps({"status": {"completionTime": "2020-01-01T00:00:00Z"}})

            def expired():
                obj = job.get()
                if obj and obj["status"].get("completionTime") != "2020-01-01T00:00:00Z":
                    # (again if the pass that finished the job wrote its status after the patch)
                    kubectl(
                        "patch",
                        job.resource,
                        "-n",
                        NS,
                        job.name,
                        "--subresource=status",
                        "--type=merge",
                        "-p",
                        day_old,
                    )
                    # A status-only write reconciles nothing (the runtime's generation
                    # predicate); an annotation does, as upstream's test calls its reconcile.
                    kubectl(
                        "annotate",
                        job.resource,
                        "-n",
                        NS,
                        job.name,
                        "--overwrite",
                        f"replay.ato.dev/poke={time.monotonic_ns()}",
                    )
                return obj is None, obj and obj["status"]

            until(expired, "deleted", interval=1)
        until(lambda: (job.get() is None, None), "deleted")
        assert "SuccessfulDeleteJob" in {e["reason"] for e in job.events()}

    @pytest.mark.parametrize("desc", CREATE_SERVICE_ROWS)
    def test_create_new_service(self, job_tests, desc):
        """tensorflow/job_test.go, DescribeTable "CreateNewService", one Entry each; NewTFJobV2(2, 0, 0,
        1, 0) (2 workers, 1 chief), the service of worker index 0.

        "containerPort is missing" and "ownerReference is invalid" cannot happen black-box: the
        defaulting adds tfjob-port (2222) to a tensorflow container without it before any service
        is made (upstream's defaulter does too), and the API server gives every job a UID. So those
        rows check the equivalent: the service has the defaulted port, and its owner reference
        names the job's real UID. "Succeeded to create service": <job>-worker-0, headless
        ClusterIP service with the job's labels as selector and port tfjob-port TCP 2222 -> 2222
        (upstream's test passes rType "", hence its empty replica-type label; ours is "worker")."""
        job = job_tests["CreateNewService"]
        svc = until(
            lambda: (
                (
                    r := kubectl(
                        "get", "service", "-n", NS, f"{job.name}-worker-0", "-o", "json", check=False
                    )
                ).returncode
                == 0,
                r,
            ),
            "the worker-0 service",
        )
        svc = json.loads(svc.stdout)
        spec = svc["spec"]
        ports = [(p["name"], p["protocol"], p["port"], p["targetPort"]) for p in spec["ports"]]
        if desc == CREATE_SERVICE_ROWS[0]:
            assert ports == [("tfjob-port", "TCP", 2222, 2222)]
        elif desc == CREATE_SERVICE_ROWS[1]:
            uid = job.get()["metadata"]["uid"]
            for obj in [*job.services().values(), *job.pods().values()]:
                assert owned_by(obj, job, uid), obj["metadata"]
        else:
            labels = {
                "training.kubeflow.org/job-name": job.name,
                "training.kubeflow.org/operator-name": "tfjob-controller",
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/replica-type": "worker",
            }
            assert svc["metadata"]["labels"] == labels
            assert spec["selector"] == labels
            assert ports == [("tfjob-port", "TCP", 2222, 2222)]
            assert (spec["clusterIP"], spec["type"], spec["sessionAffinity"]) == ("None", "ClusterIP", "None")
            job.delete()


# =============================================================================================
# B.3 training-operator pkg/controller.v1/common/pod_test.go, status_test.go and
#     tensorflow/pod_test.go; mxnet-operator pkg/controller.v1/mxnet/pod_test.go
# =============================================================================================
POLICIES = {
    "restartPolicy is ExitCode": ("ExitCode", "Never"),
    "restartPolicy is Never": ("Never", "Never"),
    "restartPolicy is Always": ("Always", "Always"),
    "restartPolicy is OnFailure": ("OnFailure", "OnFailure"),
}
TERMINATING = "terminating pod should count as failed"
CLUSTER_SPEC = {
    # description -> (job, replica counts, upstream's custom cluster domain)
    'NewTFJobWithNamespace(1, 0, "ns0"), domain ""': ("1w", {}, ""),
    'NewTFJobWithNamespace(1, 0, "ns1"), domain "tf.training.com"': ("1w", {}, "tf.training.com"),
    'NewTFJobWithNamespace(1, 1, "ns2"), domain "tf.training.org"': (
        "1w1ps",
        {"ps": 1, "worker": 1},
        "tf.training.org",
    ),
    'NewTFJobWithEvaluatorAndNamespace(1, 1, 1, "ns3"), domain "tf.training.io"': (
        "1w1ps1e",
        {"evaluator": 1, "ps": 1, "worker": 1},
        "tf.training.io",
    ),
    'NewTFJobWithEvaluatorAndNamespace(1, 1, 1, "ns3"), domain ""': (
        "1w1ps1e",
        {"evaluator": 1, "ps": 1, "worker": 1},
        "",
    ),
}
IS_DISTRIBUTED = {
    "NewTFJob(1, 0) -> false": ("1w", "worker-0", False),
    "NewTFJob(1, 1) -> true": ("1w1ps", "worker-0", True),
    "NewTFJob(0, 1) -> false": ("1ps", "ps-0", False),
    "NewTFJobWithChief(1, 0) -> true": ("1c1w", "worker-0", True),
}
EXIT_CODE = "should delete designated Pod"
UNRETRYABLE = "should set the job status to Failed"
SCALE_DOWN = "should delete redundant Pods"
SPARSE = "TestConvertClusterSpecToSparseClusterSpec"
SCALE_UP = "should create missing Pods"
# TestIsWorker0Completed: workers [failed, succeeded, running] -> expected.
WORKER0 = {
    "workers [0 0 1], NewTFJobV2(1, 1, 0, 0, 0) -> false": (
        {"PS": rep(1), "Worker": rep(1)},
        {},
        "Running",
    ),
    "workers [0 1 0], NewTFJobV2(1, 0, 0, 0, 0) -> true": ({"Worker": rep(1, ok())}, {}, "Succeeded"),
    "workers [0 0 0], NewTFJobV2(0, 0, 1, 0, 0) (Master only) -> true": (
        {"Master": rep(1, ok())},
        {},
        "Succeeded",
    ),
    "workers [0 0 0], NewTFJobV2(0, 0, 0, 1, 0) (Chief only) -> true": (
        {"Chief": rep(1, ok())},
        {},
        "Succeeded",
    ),
    "workers [1 1 0], NewTFJobV2(2, 0, 0, 0, 0) -> true": (
        {"Worker": rep(2)},
        {"worker-0": ok(), "worker-1": fail(1, "5s")},
        "Succeeded",
    ),
    "workers [1 0 1], NewTFJobV2(2, 0, 0, 0, 0) -> false": (
        {"Worker": rep(2)},
        {"worker-0": fail()},
        "Failed",
    ),
}


def _pod_tests_scenarios() -> dict[str, Scenario]:
    s: dict[str, Scenario] = {}
    for desc, (policy, _) in POLICIES.items():
        s["tf " + desc] = Scenario(tfjob("rp", {"Worker": rep(1, policy=policy)}))
        s["mx " + desc] = Scenario(mxjob("rp", {"Worker": mxrep(1, policy=policy)}))
    s[TERMINATING] = Scenario(
        tfjob(
            "term",
            {
                "Chief": rep(1),
                "Worker": rep(
                    2, annotations={SIM + "graceful-delete": "true"}, terminationGracePeriodSeconds=3
                ),
            },
        )
    )
    s["1w"] = Scenario(tfjob("cs", {"Worker": rep(1)}))
    s["1w1ps"] = Scenario(tfjob("cs", {"PS": rep(1), "Worker": rep(1)}))
    s["1w1ps1e"] = Scenario(tfjob("cs", {"Evaluator": rep(1), "PS": rep(1), "Worker": rep(1)}))
    s["1ps"] = Scenario(tfjob("cs", {"PS": rep(1)}))
    s["1c1w"] = Scenario(tfjob("cs", {"Chief": rep(1), "Worker": rep(1)}))
    s[EXIT_CODE] = Scenario(
        tfjob("test-exit-code", {"Worker": rep(1, policy="ExitCode")}), {"worker-0": fail(130)}
    )
    s[UNRETRYABLE] = Scenario(
        tfjob("test-noretry-exit-code", {"Worker": rep(1, policy="ExitCode")}), {"worker-0": fail(1)}
    )
    s[SPARSE] = Scenario(tfjob("test-tfjob", {"PS": rep(2), "Worker": rep(2)}, enableDynamicWorker=True))
    s[SCALE_DOWN] = Scenario(tfjob("test-scale-down", {"Worker": rep(3)}, enableDynamicWorker=True))
    s[SCALE_UP] = Scenario(tfjob("test-scale-up", {"Worker": rep(1)}, enableDynamicWorker=True))
    for desc, (specs, fates, _) in WORKER0.items():
        s[desc] = Scenario(tfjob("w0c", specs), fates)
    return s


SECTIONS["TestPodTest"] = _pod_tests_scenarios


class TestPodTest:
    """training-operator v1.9.0 common/pod_test.go, common/status_test.go, tensorflow/pod_test.go; mxnet-operator pod_test.go"""

    @pytest.fixture(scope="class")
    @classmethod
    def pod_tests(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("desc", list(POLICIES))
    def test_set_restart_policy(self, pod_tests, desc):
        """training-operator v1.9.0 pkg/controller.v1/common/pod_test.go, TestSetRestartPolicy, one row
        each: the replica's restartPolicy becomes the pod's, ExitCode becoming Never (the operator
        decides on the exit code)."""
        job = pod_tests["tf " + desc]
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        assert pod["spec"]["restartPolicy"] == POLICIES[desc][1]

    @pytest.mark.parametrize("desc", list(POLICIES))
    def test_tf_restart_policy_should_assign_proper_restart_policy_to_pod(self, pod_tests, desc):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/pod_test.go, Context "Test Restart
        Policy" / It "should assign proper restart policy to pod": NewTFJob(1, 0) with the Worker's
        restartPolicy ExitCode / Never / Always / OnFailure -> pod Never / Never / Always /
        OnFailure."""
        job = pod_tests["tf " + desc]
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        assert pod["spec"]["restartPolicy"] == POLICIES[desc][1]
        job.delete()

    @pytest.mark.parametrize("desc", list(POLICIES))
    def test_mxnet_restart_policy(self, pod_tests, desc):
        """kubeflow/mxnet-operator pkg/controller.v1/mxnet/pod_test.go, TestRestartPolicy (rows
        unnamed, one per policy): NewMXJob(1, 0), the Worker's restartPolicy ExitCode / Never /
        Always / OnFailure -> pod Never / Never / Always / OnFailure."""
        job = pod_tests["mx " + desc]
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        assert pod["spec"]["restartPolicy"] == POLICIES[desc][1]
        job.delete()

    def test_update_job_replica_statuses_terminating_pod(self, pod_tests):
        """training-operator v1.9.0 pkg/controller.v1/common/status_test.go, TestUpdateJobReplicaStatuses:
        failed 2, succeeded 3, active 1 and a terminating pod (Running with a deletionTimestamp) ->
        Failed 3 ("terminating pod should count as failed").

        Deliberate difference (upstream #2072): a pod being deleted is a replica being replaced, and
        is never counted failed, even once its kubelet turned it Failed (exit 143 after SIGTERM)
        while it still exists; it counts as pending. Here worker-1 of a running job (restartPolicy
        Never) is deleted gracefully: the job never fails, Worker.failed stays 0, and the replica
        is created again."""
        job = pod_tests[TERMINATING]
        job.wait_counts(Worker={"active": 2}, Chief={"active": 1})
        uid = job.pod("worker-1")["metadata"]["uid"]
        kubectl("delete", "pod", "-n", NS, f"{job.name}-worker-1", "--wait=false")
        seen_failed_terminating = False
        deadline = time.monotonic() + TIMEOUT
        while True:
            pod = job.pod("worker-1")
            status = job.status()
            assert current(status) != "Failed", brief(status)
            assert status["replicaStatuses"]["Worker"]["failed"] == 0, status["replicaStatuses"]
            if pod and pod["metadata"]["uid"] == uid:
                phase = pod["status"].get("phase")
                seen_failed_terminating |= (
                    bool(pod["metadata"].get("deletionTimestamp")) and phase == "Failed"
                )
            elif pod and pod["status"].get("phase") == "Running":
                break
            assert time.monotonic() < deadline, "worker-1 not recreated"
            time.sleep(0.3)
        assert seen_failed_terminating, "the deleted pod was never seen Failed while terminating"
        status = job.wait_counts(Worker={"active": 2, "failed": 0})
        assert current(status) == "Running"
        job.delete()

    @pytest.mark.parametrize("desc", list(CLUSTER_SPEC))
    def test_cluster_spec_should_generate_desired_cluster_spec(self, pod_tests, desc):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/pod_test.go, Context "Test ClusterSpec" /
        It "should generate desired cluster spec", one row each (rows unnamed: id = the fixture and
        domain): TF_CONFIG of worker-0 is container[0].env[0], byte for byte, and a single-replica
        job gets no env at all.

        The custom cluster domain is the operator's CUSTOM_CLUSTER_DOMAIN setting, which this suite
        does not change: the rows are checked against the running operator's domain-less hosts
        (<job>-<type>-<i>.<namespace>.svc:2222); the domain itself is covered by
        tests/unit/test_contract_tensorflow.py with upstream's strings."""
        key, cluster, _domain = CLUSTER_SPEC[desc]
        job = pod_tests[key]
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        env = pod["spec"]["containers"][0].get("env") or []
        if not cluster:
            assert env == []
        else:
            assert env[0] == {"name": "TF_CONFIG", "value": tf_config(job.name, cluster, "worker", 0)}

    @pytest.mark.parametrize("desc", list(IS_DISTRIBUTED))
    def test_is_distributed_should_returns_correctly(self, pod_tests, desc):
        """tensorflow/pod_test.go, Context "Test IsDistributed" / It "should returns correctly", one row
        each (rows unnamed: id = fixture -> expected). Black-box: a distributed job's pods get
        TF_CONFIG, a single-replica job's do not."""
        key, suffix, distributed = IS_DISTRIBUTED[desc]
        job = pod_tests[key]
        pod = job.wait_pod(suffix, lambda p: True, "created")
        assert (env_value(pod, "tensorflow", "TF_CONFIG") is not None) == distributed

    def test_exit_code_should_delete_designated_pod(self, pod_tests):
        """tensorflow/pod_test.go, Context "Test Exit Code" / It "should delete designated Pod": 1 worker,
        restartPolicy ExitCode, pod test-exit-code-worker-0 Failed with exit code 130 -> the pod is
        deleted (and created again)."""
        job = pod_tests[EXIT_CODE]
        uid = job.uids["worker-0"]
        job.wait_pod("worker-0", lambda p: p["metadata"]["uid"] != uid, "deleted and created again")
        assert {"ExitedWithCode", "TFJobRestarting"} <= job.reasons()
        assert current(job.status()) != "Failed"
        job.delete()

    def test_unretryable_exit_code_should_set_the_job_status_to_failed(self, pod_tests):
        """tensorflow/pod_test.go, Context "Test Unretryable Exit Code" / It "should set the job status to
        Failed": restartPolicy ExitCode, the worker exits 1 -> a Failed=True condition with reason
        TFJobFailed and message `job "<name>" is failing because "Worker" replica(s) failed.`
        (Go's %q); the pod is not deleted."""
        job = pod_tests[UNRETRYABLE]
        status = job.wait_finished()
        failed = find(status, "Failed")
        assert (failed["status"], failed["reason"], failed["message"]) == (
            "True",
            "TFJobFailed",
            f'job "{job.name}" is failing because "Worker" replica(s) failed.',
        )
        assert job.pod("worker-0")["metadata"]["uid"] == job.uids["worker-0"]
        job.delete()

    def test_convert_cluster_spec_to_sparse_cluster_spec(self, pod_tests):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/tensorflow_test.go,
        TestConvertClusterSpecToSparseClusterSpec: with 2 PS and 2 workers, worker 0's sparse
        cluster spec is Worker {0: its own host} and every PS; PS 0's is Worker {} and only its
        own host. Black-box: the TF_CONFIG of a job with enableDynamicWorker (key "cluster" since
        v1.7, no "environment")."""
        job = pod_tests[SPARSE]
        until(lambda: (len(p := job.pods()) == 4, sorted(p)), "4 pods")
        pods = job.pods()
        host = f"{job.name}-{{}}.{NS}.svc:2222".format
        worker = {"cluster": {"worker": {"0": host("worker-0")}, "ps": [host("ps-0"), host("ps-1")]}}
        ps = {"cluster": {"worker": {}, "ps": [host("ps-0")]}}
        for suffix, sparse, task in (("worker-0", worker, ("worker", 0)), ("ps-0", ps, ("ps", 0))):
            value = {**sparse, "task": {"type": task[0], "index": task[1]}}
            tf_config_env = env_value(pods[f"{job.name}-{suffix}"], "tensorflow", "TF_CONFIG")
            assert tf_config_env == json.dumps(value, separators=(",", ":")), suffix

    def test_gen_owner_reference(self, pod_tests):
        """tensorflow/util_test.go, TestGenOwnerReference: the owner reference has the job's UID, name
        and apiVersion kubeflow.org/v1. Black-box: on every pod and service of a job."""
        job = pod_tests[SPARSE]
        uid = job.get()["metadata"]["uid"]
        pods, services = job.pods(), job.services()
        assert pods and len(services) == len(pods), (sorted(pods), sorted(services))
        for obj in [*pods.values(), *services.values()]:
            assert owned_by(obj, job, uid), obj["metadata"]

    def test_gen_labels(self, pod_tests):
        """tensorflow/util_test.go, TestGenLabels: the job-name label is the job's name ("test/key" ->
        "test-key": a "/" cannot be in a job name here, the API server refuses it) and the
        operator-name label is the controller's name, tfjob-controller."""
        job = pod_tests[SPARSE]
        pods = job.pods()
        assert pods
        for pod in pods.values():
            labels = pod["metadata"]["labels"]
            assert labels["training.kubeflow.org/job-name"] == job.name
            assert labels["training.kubeflow.org/operator-name"] == "tfjob-controller"
        job.delete()

    def test_scale_down_should_delete_redundant_pods(self, pod_tests):
        """tensorflow/pod_test.go, Describe "Test Scale Down" / It "should delete redundant Pods": 2
        workers with enableDynamicWorker and pods of index 0, 1, 2 -> the pod of index 2 is deleted.
        Black-box: the job runs 3 workers, then its Worker replicas become 2."""
        job = pod_tests[SCALE_DOWN]
        job.wait_counts(Worker={"active": 3})
        before = {n: p["metadata"]["uid"] for n, p in job.pods().items()}
        job.patch({"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}})
        until(
            lambda: (job.suffixes(p := job.pods()) == {"worker-0", "worker-1"}, sorted(p)),
            "worker-2 deleted",
        )
        assert job.suffixes(job.services()) == {"worker-0", "worker-1"}
        assert all(before[n] == p["metadata"]["uid"] for n, p in job.pods().items())
        job.delete()

    def test_scale_up_should_create_missing_pods(self, pod_tests):
        """tensorflow/pod_test.go, Describe "Test Scale Up" / It "should create missing Pods": 3 workers
        with enableDynamicWorker and only the pod of index 0 -> 3 pods. Black-box: the job runs 1
        worker, then its Worker replicas become 3."""
        job = pod_tests[SCALE_UP]
        job.wait_counts(Worker={"active": 1})
        job.patch({"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 3}}}})
        until(
            lambda: (job.suffixes(p := job.pods()) == {"worker-0", "worker-1", "worker-2"}, sorted(p)),
            "3 worker pods",
        )
        job.delete()

    @pytest.mark.parametrize("desc", list(WORKER0))
    def test_is_worker0_completed_should_match_expected_result(self, pod_tests, desc):
        """tensorflow/pod_test.go, Describe "TestIsWorker0Completed" / It "should match expected
        result", one row each (rows unnamed: id = workers [failed, succeeded, running], the fixture
        and the expected result; upstream creates succeeded pods first, so worker-0 is a succeeded
        one when there is one). Black-box: without a Chief/Master, worker-0 completed makes the job
        Succeeded; not completed, it does not (the job is Running, or Failed by a failed worker-0).
        With a Master or Chief only, their success decides.

        For "[1 1 0]" worker-0 succeeds first, then worker-1 fails: the job stays Succeeded (a job is
        never both Succeeded and Failed)."""
        job = pod_tests[desc]
        _specs, fates, expected = WORKER0[desc]
        if expected == "Running":
            status = job.wait(
                lambda s: counts_match(s, {"Worker": {"active": 1}}) or current(s) in FINISHED,
                "worker-0 running",
            )
            assert current(status) == "Running", brief(status)
        else:
            status = job.wait_finished()
            assert current(status) == expected, brief(status)
        if "worker-1" in fates:
            reached_job(job, "Failed=1")
            reconcile_finished(job.resource, NS, job.name)
            status = job.status()
            assert current(status) == "Succeeded" and find(status, "Failed") is None, brief(status)
        job.delete()


# =============================================================================================
# B.4 training-operator pkg/controller.v1/tensorflow/tfjob_controller_test.go;
# B.6 training-operator v1.8.1 pkg/controller.v1/mxnet/mxjob_controller_test.go
# =============================================================================================
@dataclass
class NormalPath:
    desc: str
    workers: int = 4
    ps: int = 2
    template: dict[str, str] = field(default_factory=dict)
    fates: dict[str, dict[str, str]] = field(default_factory=dict)
    recreate: list[str] = field(default_factory=list)  # pods (and services) missing upstream
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    condition: tuple[str, str] | None = None
    start_time: bool = False


DIST = "Distributed TFJob (4 workers, 2 PS) is created"
NORMAL_PATH = [
    NormalPath("Local TFJob is created", workers=1, ps=0),
    NormalPath(DIST),
    NormalPath(
        DIST + " and all replicas are pending",
        template=PENDING,
        counts={"Worker": {"active": 0, "succeeded": 0, "failed": 0}, "PS": {"active": 0}},
    ),
    NormalPath(
        DIST + " and all replicas are running",
        counts={"Worker": {"active": 4}, "PS": {"active": 2}},
        condition=("Running", "TFJobRunning"),
        start_time=True,
    ),
    NormalPath(
        DIST + ", 2 workers, 1 PS are pending", template=PENDING, recreate=["worker-2", "worker-3", "ps-1"]
    ),
    NormalPath(
        DIST + ", 2 workers, 1 PS are pending, 1 worker is running",
        template=PENDING,
        fates={"worker-0": START},
        recreate=["worker-3", "ps-1"],
        counts={"Worker": {"active": 1}},
        condition=("Running", "TFJobRunning"),
    ),
    NormalPath(
        DIST + ", 2 workers, 1 PS are pending, 1 worker is succeeded",
        template=PENDING,
        fates={"worker-1": {**START, **ok()}},
        recreate=["worker-3", "ps-1"],
        counts={"Worker": {"succeeded": 1}},
    ),
    NormalPath(
        "Distributed TFJob (4 workers, 2 PS) is succeeded",
        template=ok(),
        counts={"Worker": {"succeeded": 4}, "PS": {"succeeded": 2}},
        condition=("Succeeded", "TFJobSucceeded"),
    ),
]
TF_SUSPENDED = "Shouldn't create resources if TFJob is suspended"
TF_SUSPEND_RESUME = (
    "Should delete resources after TFJob is suspended; Should resume TFJob after TFJob is unsuspended"
)
TF_EXTERNAL = "Should not reconcile a job while managed by external controller"
MX_SUSPENDED = (
    "Shouldn't create resources when MXJob is suspended; Should create resources once MXJob is unsuspended"
)
MX_SUSPEND_RESUME = (
    "Should delete resources after MXJob is suspended; Should resume MXJob after MXJob is unsuspended"
)


def _mx_suspend_job(suspend: bool) -> dict[str, Any]:
    specs = {"Server": mxrep(1), "Scheduler": mxrep(1), "Worker": mxrep(1)}
    return mxjob("test-job", specs, {"suspend": True} if suspend else None)


def _quiet(job: Job, seconds: float = 2) -> None:
    """upstream's Consistently: no pod, no service and no startTime for a while."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert job.pods() == {} and job.services() == {}
        assert "startTime" not in job.status()
        time.sleep(0.5)


def _suspend_resume(job: Job, kind: str, running_message: str, types: list[str]) -> None:
    """Both frameworks' "Should delete resources after <Kind> is suspended; Should resume <Kind>
    after <Kind> is unsuspended"."""
    n = len(types)
    status = job.wait(
        lambda s: current(s) == "Running" and counts_match(s, {t: {"active": 1} for t in types}), "Running"
    )
    started = status["startTime"]
    created = ("Created", "True", f"{kind}Created", f"{kind} {job.name} is created.")
    assert brief(status) == [created, ("Running", "True", f"{kind}Running", running_message)]
    assert len(job.services()) == n
    job.patch({"spec": {"runPolicy": {"suspend": True}}})
    until(lambda: (not (p := job.pods()) and not job.services(), sorted(p)), "pods and services removed")
    status = job.wait_state("Suspended")
    suspended = f"{kind} {job.name} is suspended."
    assert brief(status) == [
        created,
        ("Running", "False", f"{kind}Suspended", suspended),
        ("Suspended", "True", f"{kind}Suspended", suspended),
    ]
    assert counts_match(status, {t: {"active": 0} for t in types}), status["replicaStatuses"]
    time.sleep(1.5)  # Consistently: startTime unchanged while suspended (and a later resume time)
    assert job.status()["startTime"] == started
    job.patch({"spec": {"runPolicy": {"suspend": False}}})
    until(
        lambda: (len(p := job.pods()) == n and len(job.services()) == n, sorted(p)), "pods and services back"
    )
    status = job.wait(
        lambda s: current(s) == "Running" and counts_match(s, {t: {"active": 1} for t in types}),
        "Running again",
    )
    assert brief(status) == [
        created,
        ("Suspended", "False", f"{kind}Resumed", f"{kind} {job.name} is resumed."),
        ("Running", "True", f"{kind}Running", running_message),
    ]
    assert status["startTime"] != started
    job.delete()


def _controller_tests_scenarios() -> dict[str, Scenario]:
    s: dict[str, Scenario] = {}
    for row in NORMAL_PATH:
        specs = {"Worker": rep(row.workers, row.template)}
        if row.ps:
            specs["PS"] = rep(row.ps, row.template)
        s[row.desc] = Scenario(tfjob("np", specs), row.fates)
    # NewTFJobV2(1, 0, 0, 1, 0): 1 worker and 1 chief.
    chief_worker = {"Chief": rep(1), "Worker": rep(1)}
    s[TF_SUSPENDED] = Scenario(tfjob("test-job", chief_worker, {"suspend": True}))
    s[TF_SUSPEND_RESUME] = Scenario(tfjob("test-job", chief_worker))
    s[TF_EXTERNAL] = Scenario(
        tfjob("test-job", chief_worker, {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"})
    )
    s[MX_SUSPENDED] = Scenario(_mx_suspend_job(True))
    s[MX_SUSPEND_RESUME] = Scenario(_mx_suspend_job(False))
    return s


SECTIONS["TestControllerTest"] = _controller_tests_scenarios


class TestControllerTest:
    """training-operator v1.9.0 tensorflow/tfjob_controller_test.go and v1.8.1 mxnet/mxjob_controller_test.go"""

    @pytest.fixture(scope="class")
    @classmethod
    def controller_tests(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("row", NORMAL_PATH, ids=lambda r: r.desc)
    def test_normal_path_should_create_desired_pods_and_services(self, controller_tests, row):
        """training-operator v1.9.0 pkg/controller.v1/tensorflow/tfjob_controller_test.go, Context "Test
        Normal Path" / It "should create desired Pods and Services", one row each (id = its key).

        Upstream's rows start from some pods and services already there and count the creations of
        one reconcile. Black-box all of a job's pods are created at once, so the rows with missing
        pods delete those pods and their services (pending pods use start-after; a running or
        succeeded one is started by an annotation) and check that exactly those are created again,
        the others untouched. Every pod and service is owned by the job (apiVersion kubeflow.org/v1,
        kind TFJob, name, UID)."""
        job = controller_tests[row.desc]
        total = row.workers + row.ps
        until(
            lambda: (len(p := job.pods()) == total and len(job.services()) == total, sorted(p)),
            f"{total} pods and services",
        )
        if row.recreate:
            if row.counts:
                job.wait_counts(**row.counts)
            before = {n: p["metadata"]["uid"] for n, p in job.pods().items()}
            names = [f"{job.name}-{s}" for s in row.recreate]
            kubectl("delete", "pod", "-n", NS, *names, "--wait=false")
            kubectl("delete", "service", "-n", NS, *names, "--wait=false")

            def recreated():
                pods = job.pods()
                fresh = {n for n, p in pods.items() if before.get(n) != p["metadata"]["uid"]}
                kept = {n for n, p in pods.items() if before.get(n) == p["metadata"]["uid"]}
                done = (
                    fresh == set(names) and len(kept) == total - len(names) and len(job.services()) == total
                )
                return done, (sorted(fresh), sorted(kept))

            until(recreated, f"{row.recreate} created again, nothing else")
        if row.condition and row.condition[0] in FINISHED:
            status = job.wait_finished()
            assert counts_match(status, row.counts), status["replicaStatuses"]
        else:
            status = job.wait(lambda s: counts_match(s, row.counts) and s.get("replicaStatuses"), "counts")
        if row.condition:
            status = job.wait_state(row.condition[0]) if current(status) != row.condition[0] else status
            last = status["conditions"][-1]
            assert (last["type"], last["status"], last["reason"]) == (
                row.condition[0],
                "True",
                row.condition[1],
            )
        elif row.template == PENDING and not row.fates:
            assert current(status) == "Created", brief(status)
        if row.start_time:
            assert status.get("startTime")
        uid = job.get()["metadata"]["uid"]
        pods, services = job.pods(), job.services()
        assert pods and len(services) == len(pods), (sorted(pods), sorted(services))
        for obj in [*pods.values(), *services.values()]:
            assert owned_by(obj, job, uid), obj["metadata"]
        job.delete()

    def test_tfjob_shouldnt_create_resources_if_tfjob_is_suspended(self, controller_tests):
        """tfjob_controller_test.go, Context "TFJob with suspend semantics" / It "Shouldn't create
        resources if TFJob is suspended": no pods or services, startTime stays nil, and the
        conditions are exactly [Created True TFJobCreated "TFJob test-job is created.", Suspended
        True TFJobSuspended "TFJob test-job is suspended."]."""
        job = controller_tests[TF_SUSPENDED]
        job.wait_state("Suspended")
        _quiet(job)
        assert brief(job.status()) == [
            ("Created", "True", "TFJobCreated", f"TFJob {job.name} is created."),
            ("Suspended", "True", "TFJobSuspended", f"TFJob {job.name} is suspended."),
        ]
        job.delete()

    def test_tfjob_should_delete_resources_after_suspended_and_resume_after_unsuspended(
        self, controller_tests
    ):
        """tfjob_controller_test.go, Context "TFJob with suspend semantics" / It "Should delete resources
        after TFJob is suspended; Should resume TFJob after TFJob is unsuspended": running ->
        [Created, Running True TFJobRunning "TFJob <ns>/test-job is running."]; suspended -> pods and
        services gone, Chief/Worker active 0, startTime unchanged, [Created, Running False
        TFJobSuspended, Suspended True TFJobSuspended] ("TFJob test-job is suspended."); resumed ->
        pods and services back, [Created, Suspended False TFJobResumed "TFJob test-job is
        resumed.", Running True TFJobRunning], a new startTime."""
        job = controller_tests[TF_SUSPEND_RESUME]
        _suspend_resume(job, "TFJob", f"TFJob {NS}/{job.name} is running.", ["Chief", "Worker"])

    def test_tfjob_should_not_reconcile_a_job_while_managed_by_external_controller(self, controller_tests):
        """tfjob_controller_test.go, Context "TFJob with suspend semantics" / It "Should not reconcile a
        job while managed by external controller": managedBy kueue.x-k8s.io/multikueue, suspended ->
        no startTime, no pods or services, no conditions at all (not even Created); unsuspended ->
        still nothing."""
        job = controller_tests[TF_EXTERNAL]
        # A job created in the same request (and not deleted before this test) was reconciled.
        controller_tests[MX_SUSPEND_RESUME].wait(lambda s: find(s, "Created"), "Created")
        _quiet(job)
        assert not (job.get() or {}).get("status")
        job.patch({"spec": {"runPolicy": {"suspend": False}}})
        _quiet(job)
        assert not (job.get() or {}).get("status")
        job.delete()

    def test_mxjob_shouldnt_create_resources_when_suspended_should_create_once_unsuspended(
        self, controller_tests
    ):
        """training-operator v1.8.1 pkg/controller.v1/mxnet/mxjob_controller_test.go, Context "When
        creating the MXJob" / It "Shouldn't create resources when MXJob is suspended; Should create
        resources once MXJob is unsuspended": Server 1, Scheduler 1, Worker 1, suspended -> no
        startTime, no pods or services, conditions exactly [Created True MXJobCreated "MXJob
        test-job is created.", Suspended True MXJobSuspended "MXJob test-job is suspended."]. Then
        unsuspended, its pods and services are created."""
        job = controller_tests[MX_SUSPENDED]
        job.wait_state("Suspended")
        _quiet(job)
        assert brief(job.status()) == [
            ("Created", "True", "MXJobCreated", f"MXJob {job.name} is created."),
            ("Suspended", "True", "MXJobSuspended", f"MXJob {job.name} is suspended."),
        ]
        job.patch({"spec": {"runPolicy": {"suspend": False}}})
        until(
            lambda: (len(p := job.pods()) == 3 and len(job.services()) == 3, sorted(p)), "3 pods and services"
        )
        assert job.wait(lambda s: s.get("startTime"), "startTime")
        job.delete()

    def test_mxjob_should_delete_resources_after_suspended_and_resume_after_unsuspended(
        self, controller_tests
    ):
        """mxjob_controller_test.go (v1.8.1), It "Should delete resources after MXJob is suspended;
        Should resume MXJob after MXJob is unsuspended": Server, Scheduler, Worker running ->
        [Created, Running True MXJobRunning "MXJob test-job is running."]; suspended -> pods and
        services gone, active 0, startTime unchanged, [Created, Running False MXJobSuspended,
        Suspended True MXJobSuspended]; resumed -> [Created, Suspended False MXJobResumed "MXJob
        test-job is resumed.", Running True MXJobRunning], a new startTime."""
        job = controller_tests[MX_SUSPEND_RESUME]
        _suspend_resume(job, "MXJob", f"MXJob {job.name} is running.", ["Scheduler", "Server", "Worker"])


# =============================================================================================
# B.5 kubeflow/tf-operator py/kubeflow/tf_operator/*_tests.py (historic e2e)
# =============================================================================================
RESTART_CASES = {
    # test name -> (restartPolicy, exit code, expected: restart / Succeeded / Failed)
    "test_restart_always_exit_code_0": ("Always", 0, "restart"),
    "test_restart_always_exit_code_1": ("Always", 1, "restart"),
    "test_restart_onfailure_exit_code_1": ("OnFailure", 1, "restart"),
    "test_restart_onfailure_exit_code_0": ("OnFailure", 0, "Succeeded"),
    "test_restart_never_exit_code_1": ("Never", 1, "Failed"),
    "test_restart_never_exit_code_0": ("Never", 0, "Succeeded"),
    "test_restart_exitcode_permanent_error": ("ExitCode", 1, "Failed"),
    "test_restart_exitcode_retryable_error": ("ExitCode", 130, "restart"),
}
CLEANPOD = {"test_cleanpod_all": "All", "test_cleanpod_running": "Running", "test_cleanpod_none": "None"}


def _terminate_and_verify_start_time(job: Job, policy: str, code: int, expect: str) -> None:
    """replica_restart_policy_tests.py terminate_and_verify_start_time on replica ps-0.

    The simulated kubelet stamps a terminated container's startedAt at its exit, so "same
    start time" (no restart) is checked as the same pod object with no container restart."""
    job.wait_state("Running")
    ps = job.wait_pod("ps-0", lambda p: pod_started(p), "running")
    uid, started = ps["metadata"]["uid"], pod_started(ps)
    job.annotate(["ps-0"], fail(code))
    if expect == "restart":
        ps = job.wait_pod(
            "ps-0",
            lambda p: (
                (p["metadata"]["uid"] != uid or restarts(p) > 0)
                and (s := pod_started(p)) is not None
                and s > started
            ),
            "running again with a later start time",
        )
        if policy == "ExitCode":
            assert ps["metadata"]["uid"] != uid  # recreated by the operator
        else:
            assert ps["metadata"]["uid"] == uid and restarts(ps) >= 1  # restarted by the kubelet
        assert ps["status"]["phase"] == "Running"
    else:
        ps = job.wait_pod("ps-0", lambda p: p["status"].get("phase") in FINISHED, "finished")
        assert ps["status"]["phase"] == expect
        assert ps["metadata"]["uid"] == uid and restarts(ps) == 0
        time.sleep(1)
        assert job.pod("ps-0")["metadata"]["uid"] == uid  # not recreated
    job.delete()


def _restart_case(e2e_tests, name: str) -> None:
    policy, code, expect = RESTART_CASES[name]
    _terminate_and_verify_start_time(e2e_tests[name], policy, code, expect)


def _cleanpod(job: Job, policy: str) -> None:
    status = job.wait_finished()
    assert current(status) == "Succeeded", brief(status)
    ps, others = {"ps-0", "ps-1"}, {"chief-0", "worker-0", "worker-1", "worker-2", "worker-3"}
    remain = {"All": set(), "Running": others, "None": others | ps}[policy]
    until(lambda: ((got := job.suffixes(job.pods())) == remain, sorted(got)), f"pods left: {sorted(remain)}")
    time.sleep(1)
    pods = job.pods()
    assert job.suffixes(pods) == remain
    for name, pod in pods.items():
        want = "Running" if name.endswith(("ps-0", "ps-1")) else "Succeeded"
        assert pod["status"]["phase"] == want, name
    job.delete()


def _e2e_tests_scenarios() -> dict[str, Scenario]:
    s: dict[str, Scenario] = {}
    for name, (policy, _, _) in RESTART_CASES.items():
        s[name] = Scenario(tfjob("rrp", {"PS": rep(1, policy=policy), "Worker": rep(2, policy=policy)}))
    for name, policy in CLEANPOD.items():
        specs = {"Chief": rep(1, ok("4s")), "PS": rep(2), "Worker": rep(4, ok())}
        s[name] = Scenario(tfjob("cpp", specs, {"cleanPodPolicy": policy}))
    s["test_shutdown_chief"] = Scenario(
        tfjob("master-is-chief", {"Chief": rep(1), "PS": rep(2), "Worker": rep(4)})
    )
    s["test_shutdown_worker0"] = Scenario(tfjob("worker0-is-chief", {"PS": rep(2), "Worker": rep(4)}))
    s["test_distributed_training_independent_worker"] = Scenario(tfjob("dist", {"Worker": rep(3, ok())}))
    s["test_simple_tfjob_cpu"] = Scenario(
        tfjob("simple", {"Chief": rep(1, ok("3s")), "PS": rep(2, ok()), "Worker": rep(4, ok())})
    )
    s["test_tfjob_and_verify_runconfig"] = Scenario(
        tfjob(
            "estimator",
            {"Chief": rep(1), "PS": rep(2), "Worker": rep(2), "Evaluator": rep(1)},
            {"cleanPodPolicy": "All"},
        )
    )
    s["test_pod_names"] = Scenario(
        tfjob(
            "pod-names",
            {"Chief": rep(1), "PS": rep(2), "Worker": rep(3), "Evaluator": rep(1)},
            {"cleanPodPolicy": "All"},
        )
    )
    return s


SECTIONS["TestTfOperatorE2e"] = _e2e_tests_scenarios


class TestTfOperatorE2e:
    """kubeflow/tf-operator py/kubeflow/tf_operator/*_tests.py"""

    @pytest.fixture(scope="class")
    @classmethod
    def e2e_tests(cls, request):
        yield from section(request)

    def test_restart_always_exit_code_0(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/replica_restart_policy_tests.py, ReplicaRestartPolicyTests.
        test_restart_always_exit_code_0: PS 1 + Worker 2, restartPolicy Always; ps-0 exits 0 ->
        restarted (running again with a later start time)."""
        _restart_case(e2e_tests, "test_restart_always_exit_code_0")

    def test_restart_always_exit_code_1(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_always_exit_code_1: Always, ps-0 exits 1 ->
        restarted."""
        _restart_case(e2e_tests, "test_restart_always_exit_code_1")

    def test_restart_onfailure_exit_code_1(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_onfailure_exit_code_1: OnFailure, ps-0 exits 1 ->
        restarted."""
        _restart_case(e2e_tests, "test_restart_onfailure_exit_code_1")

    def test_restart_onfailure_exit_code_0(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_onfailure_exit_code_0: OnFailure, ps-0 exits 0 ->
        not restarted, ps-0 Succeeded with its start time unchanged."""
        _restart_case(e2e_tests, "test_restart_onfailure_exit_code_0")

    def test_restart_never_exit_code_1(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_never_exit_code_1: Never, ps-0 exits 1 -> not
        restarted, ps-0 Failed."""
        _restart_case(e2e_tests, "test_restart_never_exit_code_1")

    def test_restart_never_exit_code_0(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_never_exit_code_0: Never, ps-0 exits 0 -> not
        restarted, ps-0 Succeeded."""
        _restart_case(e2e_tests, "test_restart_never_exit_code_0")

    def test_restart_exitcode_permanent_error(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_exitcode_permanent_error: ExitCode, ps-0 exits 1
        (1-127: permanent) -> not restarted, "verify its phase becomes Failed"."""
        _restart_case(e2e_tests, "test_restart_exitcode_permanent_error")

    def test_restart_exitcode_retryable_error(self, e2e_tests):
        """replica_restart_policy_tests.py, test_restart_exitcode_retryable_error: ExitCode, ps-0 exits 130
        (128-255: retryable) -> restarted: the operator recreates the pod, which runs again with a
        later start time."""
        _restart_case(e2e_tests, "test_restart_exitcode_retryable_error")

    def test_cleanpod_all(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/cleanpod_policy_tests.py, CleanPodPolicyTests.
        test_cleanpod_all: cleanPodPolicy All; Chief 1 and Worker 4 exit 0, PS 2 keep running; the
        job succeeds (the Chief decides) -> every pod of the job is deleted."""
        _cleanpod(e2e_tests["test_cleanpod_all"], "All")

    def test_cleanpod_running(self, e2e_tests):
        """cleanpod_policy_tests.py, test_cleanpod_running: cleanPodPolicy Running -> the Chief and Worker
        pods are still there, Succeeded; the running PS pods are deleted."""
        _cleanpod(e2e_tests["test_cleanpod_running"], "Running")

    def test_cleanpod_none(self, e2e_tests):
        """cleanpod_policy_tests.py, test_cleanpod_none: cleanPodPolicy None -> Chief and Workers
        Succeeded, PS still Running."""
        _cleanpod(e2e_tests["test_cleanpod_none"], "None")

    def test_shutdown_chief(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/shutdown_policy_tests.py, ShutdownPolicyTests.
        test_shutdown_chief (master_is_chief_v1: Chief 1, PS 2, Worker 4, Never): once running,
        replica chief 0 is terminated with exit code 0 -> the job ends Succeeded."""
        job = e2e_tests["test_shutdown_chief"]
        job.wait_state("Running")
        job.annotate(["chief-0"], ok())
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()

    def test_shutdown_worker0(self, e2e_tests):
        """shutdown_policy_tests.py, test_shutdown_worker0 (worker0_is_chief_v1: PS 2, Worker 4, no
        chief): replica worker 0 is terminated with exit code 0 -> the job ends Succeeded."""
        job = e2e_tests["test_shutdown_worker0"]
        job.wait_state("Running")
        job.annotate(["worker-0"], ok())
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()

    def test_distributed_training_independent_worker(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/distributed_training_tests.py,
        test_distributed_training_independent_worker (distributed_training_v1: Worker 3, Never):
        the job succeeds."""
        job = e2e_tests["test_distributed_training_independent_worker"]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()

    def test_simple_tfjob_cpu(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/simple_tfjob_tests.py, SimpleTfJobTests.
        test_simple_tfjob_cpu (simple_tfjob_v1: Chief 1, PS 2, Worker 4, Never): the job succeeds,
        and there is one pod-creation and one service-creation event per replica (7 each; upstream
        only logs a warning when they are missing, this asserts them)."""
        job = e2e_tests["test_simple_tfjob_cpu"]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        events = job.events()
        for reason in ("SuccessfulCreatePod", "SuccessfulCreateService"):
            created = {e["message"] for e in events if e["reason"] == reason}
            assert len(created) == 7, (reason, sorted(created))
        job.delete()

    def test_tfjob_and_verify_runconfig(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/estimator_runconfig_tests.py, EstimatorRunconfigTests.
        test_tfjob_and_verify_runconfig (estimator_runconfig_v1: cleanPodPolicy All; Chief 1, PS 2,
        Worker 2, Evaluator 1): each replica's RunConfig is as expected, then the chief is
        terminated with exit 0 and the job succeeds.

        Upstream reads TensorFlow's RunConfig from a test server in each pod; RunConfig is what
        TensorFlow derives from TF_CONFIG, so this checks every pod's TF_CONFIG: the cluster of
        chief/evaluator/ps/worker hosts <job>-<type>-<i>.<ns>.svc:2222 and the pod's own task."""
        job = e2e_tests["test_tfjob_and_verify_runconfig"]
        cluster = {"chief": 1, "evaluator": 1, "ps": 2, "worker": 2}
        until(lambda: (len(p := job.pods()) == 6, sorted(p)), "6 pods")
        pods = job.pods()
        for rtype, n in cluster.items():
            for i in range(n):
                pod = pods[f"{job.name}-{rtype}-{i}"]
                assert env_value(pod, "tensorflow", "TF_CONFIG") == tf_config(job.name, cluster, rtype, i)
        job.wait_state("Running")
        job.annotate(["chief-0"], ok())
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        until(lambda: (not (p := job.pods()), sorted(p)), "pods cleaned (cleanPodPolicy All)")
        job.delete()

    def test_pod_names(self, e2e_tests):
        """tf-operator py/kubeflow/tf_operator/pod_names_validation_tests.py, PodNamesValidationTest.
        test_pod_names (pod_names_validation_v1: cleanPodPolicy All; Chief 1, PS 2, Worker 3,
        Evaluator 1): the pods are "{name}-{replica}-{index}" with the lower-case type; then the
        chief is terminated and the job succeeds."""
        job = e2e_tests["test_pod_names"]
        expected = {
            f"{job.name}-{rtype}-{i}"
            for rtype, n in (("chief", 1), ("ps", 2), ("worker", 3), ("evaluator", 1))
            for i in range(n)
        }
        until(lambda: (expected <= set(p := job.pods()), sorted(p)), "the expected pod names")
        job.wait_state("Running")
        job.annotate(["chief-0"], ok())
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()

    def test_invalid_tfjob_spec(self):
        """tf-operator py/kubeflow/tf_operator/invalid_tfjob_tests.py, InvalidTfJobTests.
        test_invalid_tfjob_spec (invalid_tfjob_v1: `notTheActualField` instead of tfReplicaSpecs):
        upstream accepts the job and then marks it Failed with a message matching ".*the spec is
        invalid.*".

        Deliberate difference: the job is refused at creation (spec.tfReplicaSpecs is required), as
        training-operator v1.9's webhook also does; nothing is created. (The unknown field itself
        is let through by the client here, --validate=false, as upstream's client did.)"""
        manifest = _manifest(
            "TFJob",
            "kubeflow.org/v1",
            "invalid-tfjob",
            {"notTheActualField": {"Ps": rep(1), "Worker": rep(1)}},
        )
        result = created_or_refused(manifest, "--validate=false")
        assert result.returncode != 0, result.stdout
        assert "tfReplicaSpecs" in result.stderr and "Required value" in result.stderr, result.stderr


# =============================================================================================
# B.6b mxnet-operator pod_test.go TestBytPSEnv; B.7 paddle-operator; B.9 caffe2-operator
# =============================================================================================
BYTEPS = {
    # description -> (job, pod, DMLC_WORKER_ID)
    "Worker, index 0": ("train", "worker-0", "0"),
    "Worker, index 1": ("train", "worker-1", "1"),
    "Scheduler, index 0": ("train", "scheduler-0", None),
    "Server, index 0": ("train", "server-0", None),
    "TunerTracker, index 0": ("tune", "tunertracker-0", None),
    "TunerServer, index 0": ("tune", "tunerserver-0", None),
    "Tuner, index 0": ("tune", "tuner-0", None),
}
PADDLE_WIDE_AND_DEEP = "test wide-and-deep in service mode"
CAFFE2_DEFAULTS = {
    "case 0: a template with one container": {"template": rep(1, ok())["template"]},
    "case 1: an empty ReplicaSpecs": {},
}
CAFFE2_VALIDATE = {
    "case 0: replicas 1, one container": {},
    "case 1: replicas 1, one container, terminationPolicy chief WORKER/0": {
        "terminationPolicy": {"chief": {"replicaName": "WORKER", "replicaIndex": 0}}
    },
}


def _other_tests_scenarios() -> dict[str, Scenario]:
    s: dict[str, Scenario] = {}
    s["train"] = Scenario(
        mxjob("byteps", {"Scheduler": mxrep(1), "Server": mxrep(1), "Worker": mxrep(2)}),
    )
    s["tune"] = Scenario(
        mxjob(
            "byteps",
            {"TunerTracker": mxrep(1), "TunerServer": mxrep(1), "Tuner": mxrep(1)},
            jobMode="MXTune",
        )
    )
    paddle_template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "paddle", "image": IMAGE}]},
    }
    s[PADDLE_WIDE_AND_DEEP] = Scenario(
        _manifest(
            "PaddleJob",
            "batch.paddlepaddle.org/v1",
            "wide-and-deep-service",
            {
                "cleanPodPolicy": "Never",
                "intranet": "Service",
                "ps": {"replicas": 3, "template": paddle_template},
                "worker": {"replicas": 2, "template": paddle_template},
            },
        )
    )
    s["defaults"] = Scenario(
        caffe2job("c2d", {"replicaSpecs": CAFFE2_DEFAULTS["case 0: a template with one container"]})
    )
    for desc, extra in CAFFE2_VALIDATE.items():
        s[desc] = Scenario(caffe2job("c2v", {"replicaSpecs": {"replicas": 1, **rep(1, ok())}, **extra}))
    return s


SECTIONS["TestOtherOperators"] = _other_tests_scenarios


class TestOtherOperators:
    """mxnet-operator TestBytPSEnv, paddle-operator and caffe2-operator"""

    @pytest.fixture(scope="class")
    @classmethod
    def other_tests(cls, request):
        yield from section(request)

    @pytest.mark.parametrize("desc", list(BYTEPS))
    def test_byteps_env(self, other_tests, desc):
        """kubeflow/mxnet-operator pkg/controller.v1/mxnet/pod_test.go, TestBytPSEnv (rows unnamed: id =
        replica type and index): DMLC_WORKER_ID is the index for Worker pods ("0", "1") and absent
        for Scheduler, Server, TunerTracker, TunerServer and Tuner. The tuner types run in an
        MXTune job, their mode."""
        key, suffix, value = BYTEPS[desc]
        job = other_tests[key]
        pod = job.wait_pod(suffix, lambda p: True, "created")
        assert env_value(pod, "mxnet", "DMLC_WORKER_ID") == value

    def test_paddlejob_controller_test_wide_and_deep_in_service_mode(self, other_tests):
        """PaddleFlow/paddle-operator v0.3.5 controllers/paddlejob_controller_test.go, Describe
        "PaddleJob controller" / It "test wide-and-deep in service mode": cleanPodPolicy Never,
        intranet Service, PS 3 and Worker 2 (template restartPolicy Never, container paddle) ->
        status.ps.refs has 3 pods, status.worker.refs 2, status.mode PS; then PS replicas 1 and
        Worker replicas 4 -> refs 1 and 4 (pods of index >= replicas deleted, missing ones
        created)."""
        job = other_tests[PADDLE_WIDE_AND_DEEP]

        def refs(s):
            return len((s.get("ps") or {}).get("refs") or []), len((s.get("worker") or {}).get("refs") or [])

        status = job.wait(lambda s: refs(s) == (3, 2), "refs 3 and 2")
        assert status["mode"] == "PS"
        job.patch({"spec": {"ps": {"replicas": 1}, "worker": {"replicas": 4}}})
        status = job.wait(lambda s: refs(s) == (1, 4), "refs 1 and 4")
        assert {r["name"] for r in status["ps"]["refs"]} == {f"{job.name}-ps-0"}
        assert {r["name"] for r in status["worker"]["refs"]} == {f"{job.name}-worker-{i}" for i in range(4)}
        job.delete()

    @pytest.mark.parametrize("desc", list(CAFFE2_DEFAULTS))
    def test_set_defaults_caffe2job(self, other_tests, desc):
        """kubeflow/caffe2-operator pkg/apis/caffe2/v1alpha1/defaults_test.go, TestSetDefaults_Caffe2Job
        (cases unnamed: id = the input). Case 0, a template with one container and nothing else ->
        replicas 1, pod restartPolicy Never, backend none, terminationPolicy chief WORKER/0.
        Black-box: replicas is 1 on the stored job, the one pod <job>-worker-0 has restartPolicy
        Never and the seven env variables with the none backend's empty values, and the job
        succeeds when worker 0 does.

        Case 1, an empty ReplicaSpecs (no template) -> upstream's defaulter fills in replicas 1.
        Deliberate difference: such a job could never run (no pod template); it is refused at
        creation (spec.replicaSpecs.template is required)."""
        if not CAFFE2_DEFAULTS[desc]:
            result = created_or_refused(caffe2job("c2e", {"replicaSpecs": {}}))
            assert result.returncode != 0, result.stdout
            assert "template" in result.stderr and "Required value" in result.stderr, result.stderr
            return
        job = other_tests["defaults"]
        obj = job.get()
        assert obj["spec"]["replicaSpecs"]["replicas"] == 1
        pod = job.wait_pod("worker-0", lambda p: True, "created")
        assert pod["spec"]["restartPolicy"] == "Never"
        run_id = str(int(ts(obj["metadata"]["creationTimestamp"]).timestamp()))
        config = {
            "cluster": {"worker": [f"{NS}-{job.name}-worker-0:2222"]},
            "task": {"type": "worker", "index": 0},
        }
        # The API server stores an empty value as no value (the field is omitempty).
        env = [{"name": e["name"], "value": e.get("value", "")} for e in env_of(pod, "tensorflow")]
        assert env == [
            {"name": "REDIS_HOST", "value": ""},
            {"name": "REDIS_PORT", "value": "0"},
            {"name": "NFS_PATH", "value": ""},
            {"name": "SHARD_ID", "value": "0"},
            {"name": "NUM_SHARDS", "value": "1"},
            {"name": "RUN_ID", "value": run_id},
            {"name": "CAFFE2_CONFIG", "value": json.dumps(config, separators=(",", ":"))},
        ]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()

    @pytest.mark.parametrize("desc", list(CAFFE2_VALIDATE))
    def test_caffe2_validate(self, other_tests, desc):
        """kubeflow/caffe2-operator pkg/apis/caffe2/validation/validation_test.go, TestValidate (cases
        unnamed: id = the input): both specs are valid (expectingError false). Black-box: the job is
        accepted, runs, and succeeds when worker 0 succeeds."""
        job = other_tests[desc]
        status = job.wait_finished()
        assert current(status) == "Succeeded", brief(status)
        job.delete()
