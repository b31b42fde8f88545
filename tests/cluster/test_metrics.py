"""Job counters on the operator's job-metrics endpoint, by name and labels, driven by real jobs.

Each test module run has its own namespace, so the counters of that namespace start at zero
and must end at exactly what these jobs did: a counter that double-counts a retried pass, or
misses one, fails here.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid

import pytest
from kube import kubectl, namespace_fixture, replica, wait_for

pytestmark = pytest.mark.cluster

NS = f"ato-metrics-{uuid.uuid4().hex[:6]}"
METRICS_URL = f"http://{os.environ.get('JOB_METRICS_BIND', '127.0.0.1:8686')}/metrics"

namespace = namespace_fixture(NS)


def counter(metric: str, kind: str, framework: str) -> int:
    with urllib.request.urlopen(METRICS_URL, timeout=5) as resp:
        text = resp.read().decode()
    group = "batch.paddlepaddle.org" if kind == "PaddleJob" else "kubeflow.org"  # as submit() creates it
    pattern = (
        rf'^training_operator_jobs_{metric}_total\{{job_namespace="{NS}",framework="{framework}",'
        rf'kind="{kind}",group="{group}"\}} (\d+)$'
    )
    match = re.search(pattern, text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def submit(kind: str, name: str, spec: dict) -> None:
    api = "batch.paddlepaddle.org/v1" if kind == "PaddleJob" else "kubeflow.org/v1"
    job = {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": NS}, "spec": spec}
    kubectl("apply", "-f", "-", stdin=json.dumps(job))


def state(kind: str, name: str) -> str:
    result = kubectl("get", kind.lower(), "-n", NS, name, "-o", "json", check=False)
    if result.returncode != 0:
        return "Gone"
    conditions = json.loads(result.stdout).get("status", {}).get("conditions") or [{}]
    return conditions[-1].get("type", "")


def test_tfjob_counters_count_each_outcome_once():
    submit("TFJob", "ok", {"tfReplicaSpecs": {"Worker": replica(0)}})
    submit("TFJob", "fails", {"tfReplicaSpecs": {"Worker": replica(1, policy="Never")}})
    # Exit 130 is retryable under ExitCode: one recreation, then the second reaches backoffLimit 2
    # and fails the job instead of restarting it.
    submit(
        "TFJob",
        "restarts",
        {"runPolicy": {"backoffLimit": 2}, "tfReplicaSpecs": {"Worker": replica(130, policy="ExitCode")}},
    )
    submit(
        "TFJob",
        "expires",
        {"runPolicy": {"ttlSecondsAfterFinished": 1}, "tfReplicaSpecs": {"Worker": replica(0)}},
    )
    for name, final in (("ok", "Succeeded"), ("fails", "Failed"), ("restarts", "Failed")):
        wait_for(lambda n=name, f=final: state("TFJob", n) == f, what=f"{name} {final}")
    wait_for(lambda: state("TFJob", "expires") == "Gone", what="expires deleted by its TTL")

    expected = {"created": 4, "successful": 2, "failed": 2, "restarted": 1, "deleted": 1}
    wait_for(
        lambda: {m: counter(m, "TFJob", "tensorflow") for m in expected} == expected,
        what=f"TFJob counters {expected}",
    )


def test_counters_are_labelled_per_kind():
    worker = replica(0, policy="Never")
    worker["template"]["spec"]["containers"][0]["name"] = "paddle"
    submit("PaddleJob", "pd", {"worker": {**worker, "replicas": 1}})
    wait_for(lambda: state("PaddleJob", "pd") == "Succeeded", what="pd Succeeded")
    wait_for(
        lambda: (
            (counter("created", "PaddleJob", "paddle"), counter("successful", "PaddleJob", "paddle"))
            == (1, 1)
        ),
        what="PaddleJob counters",
    )
