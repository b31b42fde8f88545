"""Gang scheduling with scheduler-plugins' coscheduling, against an operator started with
GANG_SCHEDULER_NAME=scheduler-plugins-scheduler (hack/test.sh e2e runs this stage on its own).
The PodGroup CRD is scheduler-plugins' own, from its Go module at SCHEDULER_PLUGINS_VERSION;
no coscheduling scheduler runs here, so the pods stay Pending with that schedulerName."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kube import ROOT, install_crd, job_pods, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.gang_plugins

NS = "ato-gang-plugins"
SCHEDULER = "scheduler-plugins-scheduler"
PG = "podgroup.scheduling.x-k8s.io"


def versions() -> dict[str, str]:
    lines = (ROOT / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def scheduler_plugins_crd() -> None:
    """scheduler-plugins' own PodGroup CRD, from its Go module source."""
    version = os.environ.get("SCHEDULER_PLUGINS_VERSION") or versions()["SCHEDULER_PLUGINS_VERSION"]
    module = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/scheduler-plugins@{version}"],
        capture_output=True,
        text=True,
        check=True,
    )
    crd = os.path.join(
        json.loads(module.stdout)["Dir"], "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
    )
    install_crd(crd, "podgroups.scheduling.x-k8s.io")


namespace = namespace_fixture(NS, before=scheduler_plugins_crd)


def pods(job):
    return job_pods(NS, job)


def test_pod_group_and_pods_for_coscheduling():
    container = {
        "name": "tensorflow",
        "image": "docker.io/library/busybox:1.36",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "coscheduled", "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 2, "scheduleTimeoutSeconds": 120}},
            "tfReplicaSpecs": {
                r: {"replicas": n, "template": {"spec": {"containers": [container]}}}
                for r, n in (("PS", 1), ("Worker", 2))
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    found = wait_for(
        lambda: (
            (r := kubectl("get", PG, "-n", NS, "coscheduled", "-o", "json", check=False)).returncode == 0
            and r
        ),
        what="the scheduler-plugins PodGroup",
    )
    pg = json.loads(found.stdout)
    assert pg["spec"]["minMember"] == 2, "schedulingPolicy.minAvailable wins over the replica count"
    assert pg["spec"]["scheduleTimeoutSeconds"] == 120
    # Upstream's calcPGMinResources: the requests of the first minMember pods, not of all three.
    assert pg["spec"]["minResources"] == {"cpu": "1", "memory": "2Gi"}
    assert pg["metadata"]["ownerReferences"][0]["name"] == "coscheduled"
    # Unlike Volcano, coscheduling admits the gang in the scheduler: pods are created at once.
    created = wait_for(lambda: len(pods("coscheduled")) == 3 and pods("coscheduled"), what="three pods")
    for p in created:
        assert p["spec"]["schedulerName"] == SCHEDULER
        assert p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "coscheduled"
    kubectl("delete", "tfjob", "-n", NS, "coscheduled")
    wait_for(
        lambda: kubectl("get", PG, "-n", NS, "coscheduled", check=False).returncode != 0,
        what="the PodGroup garbage-collected with its job",
    )
