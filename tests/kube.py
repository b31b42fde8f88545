"""Test helpers for the real cluster: kubectl from bin/, against the cluster in KUBECONFIG."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = str(ROOT / "bin" / "kubectl")


def kubeconfig() -> str:
    path = os.environ.get("KUBECONFIG")
    if not path:
        raise RuntimeError("KUBECONFIG is not set: run these tests through `make e2e` / hack/test.sh")
    return path


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )


def get(*args: str) -> dict:
    return json.loads(kubectl("get", "-o", "json", *args).stdout)


# How long a wait may last before it counts as a hang. A wait is for a state, never an assertion on
# speed (the benchmark holds speed): on a busy machine the operator shares two cores with the
# upstream replay and whatever else runs, and a pass can come a minute late without anything wrong.
HANG_S = 300


def wait_for(predicate, timeout: float = HANG_S, interval: float = 0.5, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; return it or fail with ``what``.
    ``timeout`` only catches a hang: pass one only to wait longer than ``HANG_S``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def namespace_fixture(name: str, before=None):
    """A module-scoped autouse fixture: the namespace exists for the module's tests, then goes.
    ``before`` (no arguments) runs first, e.g. to install a CRD the module needs."""
    import pytest

    @pytest.fixture(scope="module", autouse=True)
    def namespace():
        if before:
            before()
        kubectl("create", "namespace", name, check=False)
        yield name
        delete_namespace(name)

    return namespace


def delete_namespace(name: str) -> None:
    """Delete a test namespace without waiting, and remove its pods at once (grace 0): a pod
    whose simulated kubelet never ends it (stuck-terminating, a lost node) would otherwise hold
    the namespace in Terminating for good, and its jobs in the next operator's hands."""
    kubectl("delete", "namespace", name, "--wait=false", check=False)
    kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force", "--wait=false", check=False)


def install_crd(path: str, name: str) -> None:
    """Apply a CRD file and wait until the API server serves it."""
    kubectl("apply", "--server-side", "-f", path)
    kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


def job_pods(namespace: str, job: str) -> list[dict]:
    """The pods of a Kubeflow-labelled job."""
    return get("pods", "-n", namespace, "-l", f"training.kubeflow.org/job-name={job}")["items"]


IMAGE = "docker.io/library/busybox:1.36"


def replica(exit_code=None, run_for="1s", policy=None, *, container="tensorflow", count=None) -> dict:
    """One replica spec of busybox pods; with ``exit_code`` the KWOK stages end each pod with it
    after ``run_for``, without it they run until deleted."""
    annotations = {}
    if exit_code is not None:
        annotations = {
            "sim.training.ato.dev/exit-code": str(exit_code),
            "sim.training.ato.dev/run-for": run_for,
        }
    spec: dict = {} if count is None else {"replicas": count}
    spec["template"] = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": container, "image": IMAGE}]},
    }
    if policy:
        spec["restartPolicy"] = policy
    return spec


def finish_pod(namespace: str, name: str, exit_code: int = 0) -> None:
    """End a simulated pod now (or as soon as it runs): its containers exit with ``exit_code`` (the KWOK stage
    pod-finish, or pod-restart for a policy that restarts them). A test that must see a pod running
    starts it without an exit code and ends it itself, instead of racing a ``run-for`` timer."""
    kubectl(
        "annotate", "pod", "-n", namespace, name, "--overwrite",
        f"sim.training.ato.dev/exit-code={exit_code}", "sim.training.ato.dev/run-for=0s",
    )  # fmt: skip


def finish_job_pods(namespace: str, job: str, exit_code: int = 0) -> None:
    """``finish_pod`` for every pod of a Kubeflow-labelled job; a pod still pending ends as soon
    as it runs."""
    for pod in job_pods(namespace, job):
        finish_pod(namespace, pod["metadata"]["name"], exit_code)


def manifest(kind: str, name: str, namespace: str, spec: dict, api_version: str = "kubeflow.org/v1") -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def create_job(kind: str, name: str, namespace: str, spec: dict) -> str:
    """Apply a training-operator v1 job; its name."""
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest(kind, name, namespace, spec)))
    return name


def tfjob(name: str, specs: dict, namespace: str, run_policy: dict | None = None) -> str:
    spec = {"tfReplicaSpecs": specs, **({"runPolicy": run_policy} if run_policy else {})}
    return create_job("TFJob", name, namespace, spec)


FINISHED = "training.ato.dev/finished"


def reconcile_finished(resource: str, namespace: str, name: str, timeout: float = 60) -> None:
    """The operator's watches ignore a job labelled finished, so a change to it reaches no pass:
    take the label off, which makes the operator reconcile it once more, and wait until that
    pass has labelled it again. Tests that claim "a finished job stays as it is" need this."""
    # The runtime's update predicates pass annotation changes, not label changes: both at once.
    touch = {"metadata": {"labels": {FINISHED: None}, "annotations": {"ato.test/touched": str(time.time())}}}
    kubectl("patch", resource, "-n", namespace, name, "--type=merge", "-p", json.dumps(touch))
    wait_for(
        lambda: FINISHED in (get(resource, "-n", namespace, name)["metadata"].get("labels") or {}),
        timeout=timeout,
        what=f"{name} reconciled again and labelled finished",
    )


class Watch:
    """Every version of one object as the API server sends it, so that short-lived states (a
    pod's Terminating, a job's Restarting) are seen however busy the machine is. With ``name``
    empty, every object of ``resource`` in the namespace (or every one ``selector`` matches),
    those created later too."""

    def __init__(self, resource: str, name: str | None, namespace: str, selector: str = ""):
        self.out = tempfile.TemporaryFile()  # noqa: SIM115 - outlives __init__, closed in events()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - as above
        target = [resource, name] if name else [resource, *(["-l", selector] if selector else [])]
        # -v=6 logs the watch request: a collection may be empty, and then prints nothing at first.
        args = ["get", *target, "-n", namespace, "--watch", "--output-watch-events", "-o", "json", "-v=6"]
        self.proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", kubeconfig(), *args], stdout=self.out, stderr=self.log
        )
        # The initial list is printed first, or the watch from the list's resourceVersion has been
        # answered: from then on no change can slip by.
        wait_for(self._started, what="watch started")

    def _started(self) -> bool:
        if os.fstat(self.out.fileno()).st_size > 0:
            return True
        self.log.seek(0)
        return b'watch=true" status="200' in self.log.read()

    def events(self) -> list[tuple[str, dict]]:
        """Stop watching; the (type, object) pairs seen, oldest first."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()
        self.out.seek(0)
        text = self.out.read().decode()
        self.out.close()
        decoder, pos, events = json.JSONDecoder(), 0, []
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return events
            event, pos = decoder.raw_decode(text, pos)
            events.append((event["type"], event["object"]))


# The real node (hack/real-node.sh): a kubelet and containerd beside the KWOK nodes, named after
# its loopback address and tainted so that only pods that tolerate it land there. Its images are
# built locally and imported (never pulled): ato.local/busybox has busybox's sh and applets.
REAL_NODE = os.environ.get("REAL_NODE_IP", "127.0.2.1")
REAL_NODE_LABEL = "ato.dev/real-node"
REAL_NODE_IMAGE = "ato.local/busybox:local"


def real_replica(script: str, policy=None, *, container="tensorflow", count=None) -> dict:
    """One replica spec whose pods run ``script`` (busybox sh) in a real container on the real
    node: its exit code, output and restarts are the kubelet's, not a KWOK stage's."""
    spec: dict = {} if count is None else {"replicas": count}
    spec["template"] = {
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": container,
                    "image": REAL_NODE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                }
            ],
        }
    }
    if policy:
        spec["restartPolicy"] = policy
    return spec
