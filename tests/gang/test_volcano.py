"""Gang scheduling with Volcano, against an operator started with GANG_SCHEDULER_NAME=volcano
(hack/test.sh e2e runs this stage separately). No Volcano scheduler runs here: the test plays its
part by moving the PodGroup to Inqueue, as Volcano does when it admits the gang."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kube import get, install_crd, job_pods, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.gang

NS = "ato-gang"


namespace = namespace_fixture(
    NS,
    before=lambda: install_crd(
        str(Path(__file__).with_name("volcano-podgroup-crd.yaml")), "podgroups.scheduling.volcano.sh"
    ),
)


def pods(job):
    return job_pods(NS, job)


def test_pods_wait_for_volcano_to_admit_the_gang():
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "gang", "namespace": NS},
        "spec": {
            # The deadline's clock starts when Volcano admits the gang, not at creation.
            "runPolicy": {"schedulingPolicy": {"queue": "research"}, "activeDeadlineSeconds": 8},
            "tfReplicaSpecs": {
                r: {
                    "replicas": n,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "docker.io/library/busybox:1.36",
                                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                                }
                            ]
                        }
                    },
                }
                for r, n in (("PS", 1), ("Worker", 2))
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    found = wait_for(
        lambda: (
            (
                r := kubectl(
                    "get", "podgroup.scheduling.volcano.sh", "-n", NS, "gang", "-o", "json", check=False
                )
            ).returncode
            == 0
            and r
        ),
        what="the PodGroup",
    )
    pg = json.loads(found.stdout)
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["queue"] == "research"
    assert pg["spec"]["minResources"] == {"cpu": "1500m", "memory": "3Gi"}
    assert pg["metadata"]["ownerReferences"][0]["name"] == "gang"
    time.sleep(10)
    assert pods("gang") == [], "no pod before Volcano admits the gang (training-operator #1630)"
    tfjob = get("tfjob", "-n", NS, "gang")
    assert tfjob["status"].get("lastReconcileTime")
    assert "startTime" not in tfjob["status"], "held 10 s with an 8 s deadline: the clock has not started"
    assert not [c for c in tfjob["status"]["conditions"] if c["type"] == "Failed"]
    # Volcano admits the gang.
    kubectl(
        "patch",
        "podgroup.scheduling.volcano.sh",
        "gang",
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Inqueue"}}',
    )
    created = wait_for(lambda: len(pods("gang")) == 3 and pods("gang"), what="pods after Inqueue")
    for p in created:
        assert p["spec"]["schedulerName"] == "volcano"
        assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "gang"
        assert p["metadata"]["annotations"]["volcano.sh/task-spec"] in ("ps", "worker")

    def failed():
        conditions = get("tfjob", "-n", NS, "gang")["status"]["conditions"]
        return next((c for c in conditions if c["type"] == "Failed"), None)

    assert "deadline" in wait_for(failed, what="the deadline, counted from admission")["message"]
    kubectl("delete", "tfjob", "-n", NS, "gang")
    wait_for(
        lambda: (
            kubectl("get", "podgroup.scheduling.volcano.sh", "-n", NS, "gang", check=False).returncode != 0
        ),
        what="the PodGroup garbage-collected with its job",
    )
