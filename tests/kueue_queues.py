"""Kueue's side of the queue tests (``tests/queues``): the queues of ``config/kueue/queues.yaml``
in a test namespace, the Workload Kueue makes for a job, a held ClusterQueue, and watches that
end with the test. Kueue itself runs as ``hack/kueue.sh up`` starts it."""

from __future__ import annotations

import contextlib

import pytest
from kube import ROOT, Watch, delete_namespace, get, kubectl

QUEUES = ROOT / "config" / "kueue" / "queues.yaml"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PODSET_LABEL = "kueue.x-k8s.io/podset"
# The flavor's nodeSelector and toleration (config/kueue/queues.yaml).
GPU_NODES = {"nvidia.com/gpu.present": "true"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def queues_fixture(name: str):
    """A module-scoped autouse fixture: the namespace ``name`` with the LocalQueue ``training``
    (and the cluster-wide ClusterQueue, flavor and priority classes) for the module's tests,
    then the namespace goes."""

    @pytest.fixture(scope="module", autouse=True)
    def namespace():
        kubectl("create", "namespace", name, check=False)
        kubectl("apply", "-n", name, "-f", str(QUEUES))
        yield name
        delete_namespace(name)

    return namespace


def watch_fixture(namespace: str):
    """A fixture that starts a watch of ``resource`` in ``namespace`` by label selector; every
    one is stopped when the test ends, passed or failed."""

    @pytest.fixture
    def watch():
        started: list[Watch] = []

        def start(resource: str, selector: str) -> Watch:
            started.append(Watch(resource, None, namespace, selector))
            return started[-1]

        yield start
        for w in started:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(timeout=10)

    return watch


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def is_true(obj: dict, kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


def workload(namespace: str, kind: str, name: str) -> dict | None:
    """The Workload Kueue made for the job (its owner)."""
    for w in get("workloads.kueue.x-k8s.io", "-n", namespace)["items"]:
        if any(o["kind"] == kind and o["name"] == name for o in w["metadata"].get("ownerReferences") or []):
            return w
    return None


def workload_is(namespace: str, kind: str, name: str, state: str) -> dict | None:
    w = workload(namespace, kind, name)
    return w if w and is_true(w, state) else None


@contextlib.contextmanager
def queue_held():
    """No admission while inside: the ClusterQueue's stopPolicy Hold (admitted jobs keep running)."""
    kubectl("patch", "clusterqueue", "training", "--type=merge", "-p", '{"spec":{"stopPolicy":"Hold"}}')
    try:
        yield
    finally:
        kubectl("patch", "clusterqueue", "training", "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}')
