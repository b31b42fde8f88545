"""A full control-plane restart with jobs in flight (issue 29, item 5), as a platform team's
upgrade does it: every process of the local cluster (etcd, kube-apiserver, scheduler, controller
manager and KWOK, the "kubelets") stopped and started again while the operator runs. Every job
ends as it would have, with no pod created twice and no condition doubled. How soon is the
benchmark's measurement (the outage scenario with restart "full", docs/performance.md).

It restarts the cluster under every other test, so it runs in the step of its own that
hack/test.sh e2e gives tests/restart, with this module's operator the only one.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from kube import ROOT, finish_job_pods, get, job_pods, namespace_fixture, replica, tfjob, wait_for
from training_jobs.conditions import KUBEFLOW_TYPES
from training_jobs.plan import FINISHED_LABEL

pytestmark = pytest.mark.restarts

NS = "ato-cp-restart"
namespace = namespace_fixture(NS)
CLUSTER = ROOT / "hack" / "cluster.sh"
# The outage: as long as the (kwokctl stop, 5 s, kwokctl start). It is the scenario, not
# a wait: what follows waits on states.
DOWN_S = 5


def local_cluster() -> bool:
    """Whether KUBECONFIG is the local cluster's, which this test may stop and start."""
    name = os.environ.get("ATO_CLUSTER", "ato")
    return os.environ.get("KUBECONFIG") == str(ROOT / ".kwok" / "clusters" / name / "kubeconfig.yaml")


def pod_uids(name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in job_pods(NS, name)}


def running(name: str, count: int) -> bool:
    pods = job_pods(NS, name)
    return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


def conditions(name: str) -> list[dict]:
    return (get("tfjob", "-n", NS, name).get("status") or {}).get("conditions") or []


def finished_ok(name: str) -> bool:
    """Succeeded as its last condition and labelled finished by its last pass."""
    labels = get("tfjob", "-n", NS, name)["metadata"].get("labels") or {}
    return [c["type"] for c in conditions(name)][-1:] == ["Succeeded"] and FINISHED_LABEL in labels


def restart_control_plane() -> None:
    subprocess.run([str(CLUSTER), "stop"], check=True, capture_output=True)
    time.sleep(DOWN_S)
    subprocess.run([str(CLUSTER), "start"], check=True, capture_output=True)
    wait_for(lambda: subprocess.run([str(CLUSTER), "running"], check=False).returncode == 0, what="API ready")


def test_jobs_end_right_across_a_full_control_plane_restart(operator) -> None:
    if not local_cluster():
        pytest.skip("stops and starts the local cluster; KUBECONFIG points at another one")
    operator.start("operator-restart-control-plane.log")
    first = tfjob("cp-first", {"Worker": replica(count=2, policy="Never")}, NS)
    wait_for(lambda: running(first, 2), what=f"{first}'s pods running")
    before = pod_uids(first)
    # A burst the restart catches on the way: some of it may have pods, some not yet.
    burst = [tfjob(f"cp-{i}", {"Worker": replica(count=2, policy="Never")}, NS) for i in range(4)]
    restart_control_plane()
    for name in (first, *burst):
        wait_for(lambda n=name: running(n, 2), what=f"{name}'s pods running after the restart")
    assert pod_uids(first) == before, "a pod that ran through the restart was created again"
    for name in (first, *burst):
        finish_job_pods(NS, name)
    for name in (first, *burst):
        wait_for(lambda n=name: finished_ok(n), what=f"{name} Succeeded and labelled finished")
        types = [c["type"] for c in conditions(name)]
        assert all(t in KUBEFLOW_TYPES for t in types) and len(types) == len(set(types)), types
        status = get("tfjob", "-n", NS, name)["status"]
        assert status["replicaStatuses"]["Worker"].get("succeeded") == 2, status
        assert not status.get("restartCount"), f"{name}: a pod was recreated ({status})"
        assert len(job_pods(NS, name)) == 2, "no pod doubled"
