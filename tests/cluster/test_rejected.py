"""A job the API server will not run: its pods are refused (here by a ResourceQuota that allows
no pods). The job must fail with the API's reason, and what the pass created (its services) must
be deleted again: no half-created job is left behind."""

from __future__ import annotations

import json

import pytest
from kube import get, kubectl, namespace_fixture, wait_for
from test_lifecycle import template

pytestmark = pytest.mark.cluster

NS = "ato-rejected"

namespace = namespace_fixture(NS)


def test_refused_pods_fail_the_job_and_leave_nothing_behind():
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods", "namespace": NS},
        "spec": {"hard": {"pods": "0"}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(quota))
    wait_for(
        lambda: get("resourcequota", "-n", NS, "no-pods").get("status", {}).get("hard"), what="quota active"
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "refused", "namespace": NS},
        "spec": {"tfReplicaSpecs": {"Worker": {**template(), "replicas": 2}}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))

    def failed():
        conditions = get("tfjob", "-n", NS, "refused").get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Failed" and c["status"] == "True"), None)

    condition = wait_for(failed, timeout=30, what="the job Failed")
    assert "cannot run" in condition["message"] and "exceeded quota" in condition["message"]
    wait_for(
        lambda: not get("services", "-n", NS, "-l", "training.kubeflow.org/job-name=refused")["items"],
        timeout=30,
        what="the services of the refused pass deleted",
    )
    assert not get("pods", "-n", NS)["items"]
