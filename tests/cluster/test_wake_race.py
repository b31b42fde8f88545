"""A pod change that lands in the middle of a pass wakes its job once the pass is over (issue 37).

The test ends a job's pod at the moment a pass of that job starts its apply task (read in the
operator's log, OPERATOR_LOG): after the pass read the job and its pods, before it labels the job
idle. The pass plans with the pod running, the companion sees it finish meanwhile, and the job
must still reach Succeeded through a wake: hack/test.sh runs the zygote-off stage with the
companion's periodic list at an hour (WAKE_RESYNC_SECONDS), so the safety net cannot stand in for
a lost wake. One v1 kind (PyTorchJob) and paddle-operator's PaddleJob, whose passes differ (its
ConfigMap comes before its pods).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from kube import HANG_S, finish_pod, get, kubectl, namespace_fixture, replica, wait_for

pytestmark = pytest.mark.cluster

NS = "ato-wake-race"
APPLY_TASK = "training_job : Plan the pass and apply it"
namespace = namespace_fixture(NS)


class OperatorLog:
    """The operator's log, read from where the last read stopped."""

    def __init__(self) -> None:
        self.path = Path(os.environ["OPERATOR_LOG"])
        self.offset = self.path.stat().st_size

    def apply_started(self, kind: str, name: str) -> bool:
        """Whether a pass of the job started its apply task since the last call."""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            new = f.read()
        self.offset += len(new)
        return any(
            f'"name":"{name}"' in line and f'"namespace":"{NS}"' in line and f"Kind={kind}" in line
            for line in new.decode(errors="replace").splitlines()
            if APPLY_TASK in line
        )


def pod_phase(name: str) -> str:
    result = kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(result.stdout).get("status", {}).get("phase", "") if result.returncode == 0 else ""


def end_pod_in_a_pass(kind: str, resource: str, job: str, pod: str) -> None:
    """Once the pod runs, end it as soon as a pass of the job reaches its apply task."""
    wait_for(lambda: pod_phase(pod) == "Running", what=f"{pod} Running")
    log = OperatorLog()
    # The pass that sees the pod running (Running condition, idle label) is the one to catch; an
    # edit of the job's annotations starts one if it has already gone by.
    kubectl("annotate", resource, "-n", NS, job, "--overwrite", f"ato.test/poke={time.time()}")
    deadline = time.monotonic() + HANG_S
    while not log.apply_started(kind, job):
        assert time.monotonic() < deadline, f"no pass of {kind} {job} reached its apply task"
        time.sleep(0.05)
    finish_pod(NS, pod)


def succeeded(resource: str, name: str) -> bool:
    conditions = get(resource, "-n", NS, name).get("status", {}).get("conditions") or []
    return bool(conditions) and conditions[-1]["type"] == "Succeeded"


CASES = [
    (
        "PyTorchJob",
        "pytorchjobs.kubeflow.org",
        {
            "apiVersion": "kubeflow.org/v1",
            "spec": {
                "pytorchReplicaSpecs": {"Master": replica(None, "1s", "Never", container="pytorch", count=1)}
            },
        },
        "master-0",
    ),
    (
        "PaddleJob",
        "paddlejobs.batch.paddlepaddle.org",
        {
            "apiVersion": "batch.paddlepaddle.org/v1",
            "spec": {"worker": replica(None, "1s", "Never", container="paddle", count=1)},
        },
        "worker-0",
    ),
]


@pytest.mark.parametrize("attempt", range(3))
@pytest.mark.parametrize(("kind", "resource", "body", "pod_suffix"), CASES, ids=[c[0] for c in CASES])
def test_a_pod_that_ends_in_the_middle_of_a_pass_wakes_its_job(kind, resource, body, pod_suffix, attempt):
    name = f"race-{kind.lower()}-{attempt}"
    job = {"kind": kind, "metadata": {"name": name, "namespace": NS}, **body}
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    end_pod_in_a_pass(kind, resource, name, f"{name}-{pod_suffix}")
    wait_for(lambda: succeeded(resource, name), what=f"{kind} {name} Succeeded through a wake")
