"""Test helpers for the real cluster: kubectl from bin/, against the cluster in KUBECONFIG."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
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


def companion_pattern() -> str:
    """A ``pkill -f``/``pgrep -f`` pattern for the companions of this checkout's operators
    (hack/run.sh starts each with ``--exit-with-pid`` of its ansible-operator): an operator of
    another checkout on the machine (another test run, a developer's ``make run``) is left alone."""
    found = subprocess.run(
        ["pgrep", "-f", f"ansible-operator run --watches-file={ROOT}/watches.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )
    pids = found.stdout.split()
    assert pids, f"no operator of {ROOT} runs"
    return f"training_companion .*--exit-with-pid ({'|'.join(pids)})( |$)"


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


def finish_the_unfinished(pods: list[dict]) -> None:
    """``finish_pod`` with exit code 0 for each of ``pods`` that has no exit code yet (a poll that
    finishes what a job has made so far, leaving alone what is already finishing)."""
    for pod in pods:
        if "sim.training.ato.dev/exit-code" not in (pod["metadata"].get("annotations") or {}):
            finish_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], 0)


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
REAL_NODE_PYTHON_IMAGE = "ato.local/python:local"


def real_replica(script: str, policy=None, *, container="tensorflow", count=None) -> dict:
    """One replica spec whose pods run ``script`` (busybox sh) in a real container on the real
    node: its exit code, output and restarts are the kubelet's, not a KWOK stage's."""
    spec: dict = {} if count is None else {"replicas": count}
    spec["template"] = {
        "spec": {**on_real_node(), "containers": [real_container(container, ["sh", "-c", script])]}
    }
    if policy:
        spec["restartPolicy"] = policy
    return spec


def on_real_node() -> dict:
    """The pod spec fields that place a pod on the real node: its label and its taint."""
    return {
        "nodeSelector": {REAL_NODE_LABEL: "true"},
        "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
    }


def real_container(name: str, command: list[str], image: str = REAL_NODE_IMAGE) -> dict:
    # Images are imported by hack/real-node.sh, never pulled.
    return {"name": name, "image": image, "imagePullPolicy": "Never", "command": command}


# The two kinds of node a kubelet-semantics test runs on: KWOK's, where the stages of
# hack/kwok/cluster.yaml play the container from annotations, and the real node, where a real
# program does what the annotations describe. A test takes the `node` fixture
# (tests/cluster/conftest.py); its real variant carries the real_node marker.
KWOK, REAL = "kwok", "real"
SIM = "sim.training.ato.dev/"
# The real program that outgrows its memory limit: the kernel OOM-kills it at the limit.
MEMORY_LIMIT = "50Mi"


@dataclass(frozen=True)
class Program:
    """What a test's containers do, whichever node runs them.

    ``exit_code``: each container exits with it after ``run_for`` (a Go duration); ``None``: it
    runs until deleted. ``on_sigterm``: ``"exit"`` ends it at once (0 for a program that would
    exit 0, else 143), ``"ignore"`` leaves it running until the kubelet kills it when the grace
    period is over (137). ``oom_after``: after this Go duration it allocates past its
    ``MEMORY_LIMIT`` (137, ``OOMKilled``). ``graceful``: on KWOK, a deletion goes through SIGTERM
    (``graceful-delete``) instead of removing the pod at once; a real kubelet always does that."""

    exit_code: int | None = None
    run_for: str = "1s"
    on_sigterm: str = "exit"
    oom_after: str | None = None
    graceful: bool = False


RUNS_UNTIL_DELETED = Program()


def kwok_annotations(program: Program) -> dict[str, str]:
    annotations = {}
    if program.exit_code is not None:
        annotations |= {SIM + "exit-code": str(program.exit_code), SIM + "run-for": program.run_for}
    if program.graceful or program.on_sigterm == "ignore":
        annotations[SIM + "graceful-delete"] = "true"
    if program.on_sigterm == "ignore":
        annotations[SIM + "ignore-sigterm"] = "true"
    if program.oom_after:
        annotations[SIM + "oom-after"] = program.oom_after
    return annotations


def seconds(duration: str) -> float:
    """A Go duration such as ``1s``, ``10m`` or ``1m30s`` in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a Go duration: {duration}"
    return sum(float(n) * units[u] for n, u in parts)


def shell_program(program: Program) -> list[str]:
    """busybox sh doing what ``program`` says. A trapped signal interrupts ``wait`` at once, not
    a foreground ``sleep``: hence ``sleep & wait``."""
    sigterm = {"exit": f"trap 'echo got SIGTERM; exit {0 if program.exit_code == 0 else 143}' TERM",
               "ignore": "trap '' TERM"}[program.on_sigterm]  # fmt: skip
    if program.exit_code is None:
        body = "echo running until deleted; while :; do sleep 3600 & wait $!; done"
    else:
        wait = seconds(program.run_for)
        body = f"echo exits {program.exit_code} after {wait:g}s; sleep {wait:g} & wait $!; exit {program.exit_code}"
    return ["sh", "-c", f"{sigterm}; {body}"]


def python_memory_hog(program: Program) -> list[str]:
    """Python (the python image has no shell) that outgrows ``MEMORY_LIMIT`` by four times after
    ``oom_after``; SIGTERM as ``program`` says (PID 1 would ignore it without a handler)."""
    handler = "lambda *_: sys.exit(143)" if program.on_sigterm == "exit" else "signal.SIG_IGN"
    code = (
        f"import signal, sys, time; signal.signal(signal.SIGTERM, {handler}); "
        f"print('allocating 200 MiB after {program.oom_after}', flush=True); "
        f"time.sleep({seconds(program.oom_after or '0s')}); "
        "hog = [bytearray(1 << 20) for _ in range(200)]; print('survived')"
    )
    return ["python3", "-c", code]


def node_template(node: str, program: Program, containers=("tensorflow",)) -> dict:
    """A pod template (metadata and spec, no restart policy) whose ``containers`` do what
    ``program`` says: on KWOK by annotations for its stages, on the real node by a real program
    in the node's local images, with the node's selector and toleration."""
    resources = {"resources": {"limits": {"memory": MEMORY_LIMIT}}} if program.oom_after else {}
    if node == KWOK:
        return {
            "metadata": {"annotations": kwok_annotations(program)},
            "spec": {"containers": [{"name": c, "image": IMAGE, **resources} for c in containers]},
        }
    assert node == REAL, node
    if program.oom_after:
        command, image = python_memory_hog(program), REAL_NODE_PYTHON_IMAGE
    else:
        command, image = shell_program(program), REAL_NODE_IMAGE
    return {
        "metadata": {"annotations": {}},
        "spec": {
            **on_real_node(),
            "containers": [real_container(c, command, image) | resources for c in containers],
        },
    }


def node_replica(node: str, program: Program, policy=None, *, container="tensorflow", count=None) -> dict:
    """``replica`` on either node: one replica spec whose pods do what ``program`` says."""
    spec: dict = {} if count is None else {"replicas": count}
    spec["template"] = node_template(node, program, (container,))
    if policy:
        spec["restartPolicy"] = policy
    return spec
