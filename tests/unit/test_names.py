"""Names and label values the operator derives from a job always fit Kubernetes' rules.

Services must be DNS-1035 labels (at most 63 characters, starting with a letter); label values
are limited to 63 characters. Names that fit stay byte-for-byte upstream's (caffe2-operator's
``genGeneralName``/``genLabels`` in ``pkg/controller/{config,controller}.go``, the original
TfJob's ``<job>-tensorboard``); the others take ``dns_label``'s fallback
``<head>-<8 hex of sha256(base)><suffix>``. The expected fallbacks are spelled out so a change
of the rule, which renames the objects of running jobs, shows up here.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from training_jobs import tensorboard
from training_jobs.contracts import caffe2
from training_jobs.plan import plan

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

NS63 = "n" * 63  # the longest namespace
JOB63 = "j" * 63  # the longest job name (a CRD rule)


def assert_service_name(name):
    assert len(name) <= 63, name
    assert DNS_1035.match(name), name


@pytest.mark.parametrize(
    ("case", "namespace", "job", "index", "expected"),
    [
        # Upstream's names where they fit, byte for byte.
        ("README job", "default", "example-job", 0, "default-example-job-worker-0"),
        ("namespace-less key", "", "example-job", 3, "example-job-worker-3"),
        ("exactly 63", "team-a", "x" * 47, 9, "team-a-" + "x" * 47 + "-worker-9"),
        # One character more: the fallback, which keeps the suffix whole.
        ("64 characters", "team-a", "x" * 48, 9, "team-a-" + "x" * 38 + "-8e71f023-worker-9"),
        (
            "long namespace and long job",
            NS63,
            JOB63,
            0,
            "n" * 45 + "-f2012331-worker-0",
        ),
        (
            "long namespace and long job, two-digit index",
            NS63,
            JOB63,
            11,
            "n" * 44 + "-f2012331-worker-11",
        ),
        # A namespace may start with a digit; a Service name may not.
        ("namespace starting with a digit", "1team", "resnet50", 0, "team-resnet50-ae255fbd-worker-0"),
        ("all-digit namespace", "123", "job", 1, "job-f34b46e1-worker-1"),
    ],
)
def test_caffe2_host_names(case, namespace, job, index, expected):
    name = caffe2.host_name(namespace, job, index)
    assert name == expected
    assert_service_name(name)


@pytest.mark.parametrize(
    ("case", "job", "expected"),
    [
        ("fits", "mnist", "mnist-tensorboard"),
        ("exactly 63", "t" * 51, "t" * 51 + "-tensorboard"),
        ("64 characters", "t" * 52, "t" * 42 + "-579967c6-tensorboard"),
        ("the longest job name", JOB63, "j" * 42 + "-24317a20-tensorboard"),
    ],
)
def test_tensorboard_names(case, job, expected):
    name = tensorboard.name(job)
    assert name == expected
    assert_service_name(name)


@pytest.mark.parametrize(
    ("case", "value", "expected"),
    [
        # Label values may start with a digit: upstream's caffe2_job_key is kept.
        ("caffe2_job_key, digit namespace", "1team-resnet50", "1team-resnet50"),
        ("caffe2_job_key that fits", "default-example-job", "default-example-job"),
        ("runtime_id", "1529307087", "1529307087"),
        ("caffe2_job_key too long", f"{NS63}-{JOB63}", "n" * 54 + "-f2012331"),
        ("not a label value", "run 7", "run-7-04ee2979"),
    ],
)
def test_label_values(case, value, expected):
    result = caffe2.label_value(value)
    assert result == expected
    assert len(result) <= 63 and LABEL_VALUE.match(result)


def test_fallback_keeps_jobs_apart_that_differ_past_the_cut():
    a = caffe2.host_name(NS63, "a" + "j" * 62, 0)
    b = caffe2.host_name(NS63, "b" + "j" * 62, 0)
    assert a != b and a[:45] == b[:45]


# Namespaces are DNS-1123 labels, job names DNS-1035 labels (CRD rule): every pair must give
# valid, distinct, stable names.
namespaces = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
job_names = st.from_regex(r"\A[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")


@given(namespace=namespaces, job=job_names, replicas=st.integers(1, 120))
def test_any_job_gets_valid_distinct_names(namespace, job, replicas):
    hosts = caffe2.host_names(namespace, job, replicas)
    for name in hosts:
        assert_service_name(name)
    assert len(set(hosts)) == replicas
    assert hosts == caffe2.host_names(namespace, job, replicas)
    assert_service_name(tensorboard.name(job))
    assert_service_name(caffe2.dns_label(job, "-redis"))
    key = caffe2.label_value(caffe2.job_key(namespace, job))
    assert len(key) <= 63 and LABEL_VALUE.match(key)


def caffe2_job(namespace, name, replicas=2, backend=None):
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "Caffe2Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "uid-1",
            "creationTimestamp": "2018-06-18T07:31:27Z",
            "annotations": {"training.ato.dev/tensorboard-log-dir": "/logs/run1"},
        },
        "spec": {
            "backendSpecs": backend or {"backendType": "redis", "manageRedis": True},
            "replicaSpecs": {
                "replicas": replicas,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "caffe2",
                                "image": "busybox",
                                "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
                            }
                        ],
                        "volumes": [{"name": "logs", "emptyDir": {}}],
                    }
                },
            },
        },
    }


@pytest.mark.parametrize(
    ("namespace", "name"),
    [
        ("default", "example-job"),
        ("1team", "resnet50"),
        # The longest job name the CRD admits with two workers: its pods are <job>-worker-1.
        (NS63, "j" * 54),
    ],
)
def test_created_objects_have_valid_names_and_hosts_resolve(namespace, name):
    job = caffe2_job(namespace, name)
    observed = {"pods": [], "services": [], "configmaps": [], "deployments": []}
    for _ in range(3):
        result = plan(job, observed, {}, "2026-11-23T10:00:00Z")
        if result["status"] is not None:
            job["status"] = result["status"]
        for obj in result["create"]:
            observed[obj["kind"].lower() + "s"].append(obj)
    assert not [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    for obj in observed["pods"] + observed["services"] + observed["deployments"]:
        assert_service_name(obj["metadata"]["name"])
        for value in obj["metadata"]["labels"].values():
            assert len(value) <= 63 and LABEL_VALUE.match(value), value
    services = {s["metadata"]["name"] for s in observed["services"]}
    workers = [p for p in observed["pods"] if "caffe2_replica_index" in p["metadata"]["labels"]]
    assert len(workers) == 2
    redis = caffe2.dns_label(name, "-redis")
    hosts = caffe2.host_names(namespace, name, 2)
    for pod in workers:
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        config_hosts = json.loads(env["CAFFE2_CONFIG"])["cluster"]["worker"]
        assert config_hosts == [f"{h}:2222" for h in hosts]
        assert env["REDIS_HOST"] == redis
    assert set(hosts) | {redis, tensorboard.name(name)} <= services
