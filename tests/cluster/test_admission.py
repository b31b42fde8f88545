"""The job APIs against a real API server: samples are admitted, every invalid job is refused.

Runs with ``KUBECONFIG`` pointing at the test cluster (``pytest tests/cluster -m cluster``).
Most requests are server-side dry runs, so the CRD schema, its CEL rules and the admission
policies all run while nothing is stored. Immutability needs a stored object to compare with:
those tests create jobs (suspended, so an operator watching the namespace starts no pods) in a
namespace of their own, which is deleted at the end.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import HANG_S

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / "bin" / "kubectl"
SAMPLES = ROOT / "config" / "samples"
POLICIES = ["ato-tfjob-pod-templates", "ato-mxjob-pod-templates", "ato-paddlejob-pod-templates"]
POLICIES.append("ato-caffe2job-pod-templates")

Job = dict[str, Any]


def kubectl(*args: str, stdin: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(KUBECTL), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
    return result


def sample(name: str) -> Job:
    return yaml.safe_load((SAMPLES / name).read_text())


def dry_run(job: Job, namespace: str) -> subprocess.CompletedProcess:
    """Server-side apply as a dry run: the full admission chain runs, nothing is stored."""
    job = copy.deepcopy(job)
    job["metadata"]["namespace"] = namespace
    return kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=ato-admission-test",
        "--dry-run=server",
        "-f",
        "-",
        stdin=json.dumps(job),
    )


def create(job: Job, namespace: str) -> None:
    job = copy.deepcopy(job)
    job["metadata"]["namespace"] = namespace
    kubectl(
        "apply",
        "--server-side",
        "--field-manager=ato-admission-test",
        "-f",
        "-",
        stdin=json.dumps(job),
        check=True,
    )


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def cluster() -> None:
    # Fail, not skip: the harness always provides a cluster, so a missing one is an error.
    kubeconfig = os.environ.get("KUBECONFIG")
    assert kubeconfig, "KUBECONFIG is not set: point it at the test cluster"
    assert Path(kubeconfig).is_file(), f"KUBECONFIG={kubeconfig} does not exist"
    ready = kubectl("get", "--raw", "/readyz")
    assert ready.returncode == 0, f"the API server is not ready: {ready.stderr}"


@pytest.fixture(scope="session")
def namespace(cluster: None) -> str:
    name = f"ato-admission-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name, check=True)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture(scope="session", autouse=True)
def apis(namespace: str) -> None:
    """Install (or update) the CRDs and policies under test and wait until both are in force."""
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / "crd"), check=True)
    kubectl(
        "wait",
        "--for=condition=Established",
        "crd",
        "-l",
        "app.kubernetes.io/part-of=ansible-training-operator",
        "--timeout=60s",
        check=True,
    )
    kubectl(
        "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / "admission"), check=True
    )
    # Policies take effect asynchronously: wait until each kind's policy refuses a job without containers.
    probes = {
        "tfjob_dist.yaml": ("tfReplicaSpecs", "Worker"),
        "mxjob_linear_dist.yaml": ("mxReplicaSpecs", "Worker"),
        "paddlejob_resnet.yaml": ("worker",),
        "caffe2job_resnet50_nfs.yaml": ("replicaSpecs",),
    }
    for name, path in probes.items():
        job = sample(name)
        pod(job, *path)["containers"] = []
        deadline = time.monotonic() + HANG_S
        while "ValidatingAdmissionPolicy" not in dry_run(job, namespace).stderr:
            assert time.monotonic() < deadline, f"the admission policy never refused a broken {name}"
            time.sleep(1)


def pod(j: Job, *path: str) -> dict:
    """The pod spec of the template at ``path`` below spec."""
    node = j["spec"]
    for key in path:
        node = node[key]
    return node["template"]["spec"]


# --- good jobs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", sorted(p.name for p in SAMPLES.glob("*.yaml") if p.name != "kustomization.yaml")
)
def test_sample_is_admitted(name: str, namespace: str) -> None:
    result = dry_run(sample(name), namespace)
    assert result.returncode == 0, result.stderr


def test_samples_kustomization_applies(namespace: str) -> None:
    result = kubectl("apply", "--dry-run=server", "-n", namespace, "-k", str(SAMPLES))
    assert result.returncode == 0, result.stderr


def every_policy() -> list[str]:
    docs = [
        d
        for f in sorted((ROOT / "config" / "admission").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
    ]
    return [d["metadata"]["name"] for d in docs if d and d["kind"] == "ValidatingAdmissionPolicy"]


def test_policies_type_check_cleanly() -> None:
    names = every_policy()
    # One per v1 kind; Trainer v2's TrainJob has four (alone, against each runtime kind, a
    # deprecated runtime's warning), TrainingRuntime one and ClusterTrainingRuntime two.
    assert len(names) == 9 + 4 + 1 + 2
    for name in names:
        # The controller manager type-checks a policy after it is written: wait for its verdict.
        deadline = time.monotonic() + HANG_S
        while True:
            out = kubectl("get", "validatingadmissionpolicy", name, "-o", "json", check=True)
            status = json.loads(out.stdout).get("status") or {}
            if "typeChecking" in status or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert "typeChecking" in status, f"{name} was never type-checked: {status}"
        assert not status["typeChecking"].get("expressionWarnings"), status


# --- bad jobs ----------------------------------------------------------------------------------


def edit(name: str, change: Callable[[Job], Any]) -> Job:
    job = sample(name)
    change(job)
    return job


def tf(change: Callable[[Job], Any]) -> Job:
    return edit("tfjob_dist.yaml", change)


def mx(change: Callable[[Job], Any]) -> Job:
    return edit("mxjob_linear_dist.yaml", change)


def paddle(change: Callable[[Job], Any]) -> Job:
    return edit("paddlejob_wide_and_deep.yaml", change)


def caffe2(change: Callable[[Job], Any]) -> Job:
    return edit("caffe2job_resnet50_redis.yaml", change)


def tf_specs(j: Job) -> dict:
    return j["spec"]["tfReplicaSpecs"]


def rename(j: Job, name: str) -> None:
    j["metadata"]["name"] = name


def respell(specs: dict, **keys: str) -> None:
    """Write replica-type keys another way (worker for Worker): respell(specs, Worker="worker")."""
    for old, new in keys.items():
        specs[new] = specs.pop(old)


def pt(change: Callable[[Job], Any]) -> Job:
    return edit("pytorchjob_simple.yaml", change)


# (id, job, expected part of the error). Messages are the API; users read them.
BAD: list[tuple[str, Job, str]] = [
    # --- every kind: job name ---
    ("name-not-dns1035", tf(lambda j: rename(j, "tf.dist")), "metadata.name must be a DNS-1035 label"),
    (
        "name-starts-with-digit",
        paddle(lambda j: rename(j, "1-paddle")),
        "metadata.name must be a DNS-1035 label",
    ),
    (
        "tf-name-too-long-for-workers",
        tf(lambda j: (rename(j, "a" * 55), tf_specs(j)["Worker"].update(replicas=10))),
        "metadata.name is too long: pod and service name '"
        + "a" * 55
        + "-worker-9' would have 64 characters "
        "(limit 63); shorten metadata.name by 1 characters",
    ),
    (
        "mx-name-too-long-for-tunertracker",
        mx(
            lambda j: (
                rename(j, "m" * 50),
                j["spec"].update(jobMode="MXTune"),
                j["spec"]["mxReplicaSpecs"].update(
                    TunerTracker={
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [{"name": "mxnet", "image": "docker.io/library/busybox:1.36"}]
                            }
                        },
                    }
                ),
            )
        ),
        "'" + "m" * 50 + "-tunertracker-0' would have 65 characters (limit 63); shorten metadata.name by 2",
    ),
    (
        "paddle-name-too-long-for-ps",
        paddle(lambda j: (rename(j, "p" * 58), j["spec"]["ps"].update(replicas=11))),
        "'" + "p" * 58 + "-ps-10' would have 64 characters",
    ),
    (
        "caffe2-name-too-long-for-workers",
        caffe2(lambda j: rename(j, "c" * 55)),
        "'" + "c" * 55 + "-worker-1' would have 64 characters",
    ),
    # --- run policy (shared) ---
    (
        "runpolicy-cleanpodpolicy",
        tf(lambda j: j["spec"]["runPolicy"].update(cleanPodPolicy="Some")),
        'spec.runPolicy.cleanPodPolicy: Unsupported value: "Some"',
    ),
    (
        "runpolicy-negative-backofflimit",
        mx(lambda j: j["spec"].update(runPolicy={"backoffLimit": -1})),
        "spec.runPolicy.backoffLimit: Invalid value: -1",
    ),
    (
        "runpolicy-negative-ttl",
        caffe2(lambda j: j["spec"].update(runPolicy={"ttlSecondsAfterFinished": -5})),
        "spec.runPolicy.ttlSecondsAfterFinished: Invalid value: -5",
    ),
    (
        "runpolicy-managedby",
        paddle(lambda j: j["spec"].update(runPolicy={"managedBy": "example.com/other"})),
        'spec.runPolicy.managedBy: Unsupported value: "example.com/other"',
    ),
    # --- TFJob ---
    (
        "tf-no-tensorflow-container",
        tf(lambda j: pod(j, "tfReplicaSpecs", "Worker")["containers"][0].update(name="main")),
        "spec.tfReplicaSpecs.Worker.template must have a container named 'tensorflow': rename the training "
        "container to 'tensorflow'",
    ),
    (
        "tf-no-containers",
        tf(lambda j: pod(j, "tfReplicaSpecs", "PS").update(containers=[])),
        "spec.tfReplicaSpecs.PS.template.spec.containers must list at least one container",
    ),
    (
        "tf-no-pod-spec",
        tf(lambda j: tf_specs(j)["PS"].update(template={})),
        "spec.tfReplicaSpecs.PS.template.spec.containers must list at least one container",
    ),
    (
        "tf-no-template",
        tf(lambda j: tf_specs(j)["PS"].pop("template")),
        "spec.tfReplicaSpecs.PS.template: Required value",
    ),
    (
        "tf-empty-image",
        tf(lambda j: pod(j, "tfReplicaSpecs", "Chief")["containers"][0].update(image="")),
        "spec.tfReplicaSpecs.Chief.template: container 'tensorflow' has no image: set its image",
    ),
    (
        "tf-sidecar-without-image",
        tf(lambda j: pod(j, "tfReplicaSpecs", "Worker")["containers"].append({"name": "sidecar"})),
        "spec.tfReplicaSpecs.Worker.template: container 'sidecar' has no image",
    ),
    (
        "tf-chief-and-master",
        tf(lambda j: tf_specs(j).update(Master=copy.deepcopy(tf_specs(j)["Chief"]))),
        "must not have both Chief and Master",
    ),
    (
        "tf-two-chiefs",
        tf(lambda j: tf_specs(j)["Chief"].update(replicas=2)),
        "spec.tfReplicaSpecs.Chief.replicas must be 0 or 1",
    ),
    # Keys in any case are TFJob's (training-operator's defaulter camel-cases them), but one key
    # per replica type, and only replica types.
    (
        "tf-worker-and-Worker",
        tf(lambda j: tf_specs(j).update(worker=copy.deepcopy(tf_specs(j)["Worker"]))),
        "both name the replica type Worker; keep one of them",
    ),
    (
        "tf-unknown-type",
        tf(lambda j: respell(tf_specs(j), Worker="workers")),
        "spec.tfReplicaSpecs has unknown replica type 'workers': use one of Chief, Master, PS, Worker, "
        "Evaluator (in any case)",
    ),
    (
        "tf-lowercase-chief-and-master",
        tf(
            lambda j: (
                respell(tf_specs(j), Chief="chief"),
                tf_specs(j).update(MASTER=copy.deepcopy(tf_specs(j)["chief"])),
            )
        ),
        "must not have both Chief and Master",
    ),
    (
        "tf-two-lowercase-chiefs",
        tf(lambda j: (respell(tf_specs(j), Chief="chief"), tf_specs(j)["chief"].update(replicas=2))),
        "spec.tfReplicaSpecs.chief.replicas must be 0 or 1",
    ),
    (
        "tf-lowercase-no-tensorflow-container",
        tf(
            lambda j: (
                respell(tf_specs(j), Worker="worker"),
                pod(j, "tfReplicaSpecs", "worker")["containers"][0].update(name="main"),
            )
        ),
        "spec.tfReplicaSpecs.worker.template must have a container named 'tensorflow'",
    ),
    (
        "tf-no-replica-types",
        tf(lambda j: j["spec"].update(tfReplicaSpecs={})),
        "must have at least one replica type",
    ),
    (
        "tf-negative-replicas",
        tf(lambda j: tf_specs(j)["Worker"].update(replicas=-1)),
        "spec.tfReplicaSpecs.Worker.replicas: Invalid value: -1",
    ),
    (
        "tf-restart-policy",
        tf(lambda j: tf_specs(j)["Worker"].update(restartPolicy="Sometimes")),
        'spec.tfReplicaSpecs.Worker.restartPolicy: Unsupported value: "Sometimes"',
    ),
    (
        "tf-success-policy",
        tf(lambda j: j["spec"].update(successPolicy="AnyWorker")),
        'spec.successPolicy: Unsupported value: "AnyWorker"',
    ),
    # --- MXJob ---
    (
        "mx-no-mxnet-container",
        mx(lambda j: pod(j, "mxReplicaSpecs", "Server")["containers"][0].update(name="main")),
        "spec.mxReplicaSpecs.Server.template must have a container named 'mxnet'",
    ),
    (
        "mx-distributed-without-scheduler",
        mx(lambda j: j["spec"]["mxReplicaSpecs"].pop("Scheduler")),
        "needs exactly one scheduler: add spec.mxReplicaSpecs.Scheduler with replicas: 1",
    ),
    (
        "mx-workers-without-scheduler",
        mx(
            lambda j: (
                j["spec"]["mxReplicaSpecs"].pop("Scheduler"),
                j["spec"]["mxReplicaSpecs"].pop("Server"),
                j["spec"]["mxReplicaSpecs"]["Worker"].update(replicas=2),
            )
        ),
        "needs exactly one scheduler",
    ),
    (
        "mx-server-without-scheduler",
        mx(
            lambda j: (
                j["spec"]["mxReplicaSpecs"].pop("Scheduler"),
                j["spec"]["mxReplicaSpecs"]["Server"].update(replicas=0),
            )
        ),
        "needs exactly one scheduler",
    ),
    (
        "mx-scheduler-without-replicas",
        mx(lambda j: j["spec"]["mxReplicaSpecs"]["Scheduler"].update(replicas=0)),
        "spec.mxReplicaSpecs.Scheduler.replicas must be 1",
    ),
    (
        "mx-two-schedulers",
        mx(lambda j: j["spec"]["mxReplicaSpecs"]["Scheduler"].update(replicas=2)),
        "spec.mxReplicaSpecs.Scheduler.replicas must be 1",
    ),
    (
        "mx-job-mode",
        mx(lambda j: j["spec"].update(jobMode="MXServe")),
        'spec.jobMode: Unsupported value: "MXServe"',
    ),
    (
        "mx-lowercase-tuner",
        mx(
            lambda j: (
                j["spec"].update(jobMode="MXTune"),
                j["spec"]["mxReplicaSpecs"].pop("Scheduler"),
                respell(j["spec"]["mxReplicaSpecs"], Worker="tuner"),
            )
        ),
        "spec.mxReplicaSpecs has unknown replica type 'tuner': use one of Scheduler, Server, Worker (in any "
        "case) or TunerTracker, TunerServer, Tuner (case-sensitive)",
    ),
    (
        "mx-two-lowercase-schedulers",
        mx(
            lambda j: (
                respell(j["spec"]["mxReplicaSpecs"], Scheduler="scheduler"),
                j["spec"]["mxReplicaSpecs"]["scheduler"].update(replicas=2),
            )
        ),
        "spec.mxReplicaSpecs.Scheduler.replicas must be 1",
    ),
    (
        "mx-unknown-type",
        mx(
            lambda j: j["spec"]["mxReplicaSpecs"].update(
                Chief=copy.deepcopy(j["spec"]["mxReplicaSpecs"]["Worker"])
            )
        ),
        "unknown replica type 'Chief'",
    ),
    # --- PyTorchJob: training-operator's webhook wants the keys exact ---
    (
        "pt-lowercase-type",
        pt(lambda j: respell(j["spec"]["pytorchReplicaSpecs"], Worker="worker")),
        "spec.pytorchReplicaSpecs has unknown replica type 'worker': use one of Master, Worker (case-sensitive)",
    ),
    # --- PaddleJob ---
    (
        "paddle-no-roles",
        paddle(lambda j: (j["spec"].pop("ps"), j["spec"].pop("worker"))),
        "needs at least one of",
    ),
    (
        "paddle-replicas-required",
        paddle(lambda j: j["spec"]["ps"].pop("replicas")),
        "spec.ps.replicas: Required value",
    ),
    (
        "paddle-no-containers",
        paddle(lambda j: pod(j, "worker").update(containers=[])),
        "spec.worker.template.spec.containers must list at least one container",
    ),
    (
        "paddle-empty-image",
        paddle(lambda j: pod(j, "ps")["containers"][0].pop("image")),
        "spec.ps.template: container 'paddle' has no image",
    ),
    (
        "paddle-with-gloo",
        paddle(lambda j: j["spec"].update(withGloo=3)),
        "spec.withGloo: Unsupported value: 3",
    ),
    (
        "paddle-intranet",
        paddle(lambda j: j["spec"].update(intranet="Overlay")),
        'Unsupported value: "Overlay"',
    ),
    (
        "paddle-clean-pod-policy",
        paddle(lambda j: j["spec"].update(cleanPodPolicy="None")),
        'spec.cleanPodPolicy: Unsupported value: "None"',
    ),
    (
        "paddle-two-clean-pod-policies",
        paddle(lambda j: j["spec"].update(runPolicy={"cleanPodPolicy": "All"})),
        "set only one of spec.cleanPodPolicy (paddle-operator values) and spec.runPolicy.cleanPodPolicy",
    ),
    (
        "paddle-two-scheduling-policies",
        paddle(
            lambda j: j["spec"].update(schedulingPolicy={"queue": "a"}, runPolicy={"schedulingPolicy": {}})
        ),
        "set only one of spec.schedulingPolicy and spec.runPolicy.schedulingPolicy",
    ),
    (
        "paddle-requests-over-limits",
        paddle(lambda j: j["spec"]["worker"].update(requests=3, limits=2)),
        "requests (fewest replicas) must not exceed limits",
    ),
    # --- Caffe2Job ---
    (
        "caffe2-several-workers-without-backend",
        caffe2(lambda j: j["spec"].pop("backendSpecs")),
        "Invalid backend for multiple pods",
    ),
    (
        "caffe2-several-workers-backend-none",
        caffe2(lambda j: j["spec"].update(backendSpecs={"backendType": "none"})),
        "Invalid backend for multiple pods",
    ),
    (
        "caffe2-redis-without-host",
        caffe2(lambda j: j["spec"]["backendSpecs"].pop("redisHost")),
        "the redis backend needs a server: set spec.backendSpecs.redisHost or spec.backendSpecs.manageRedis: true",
    ),
    (
        "caffe2-default-backend-without-host",
        caffe2(lambda j: j["spec"].update(backendSpecs={"redisPort": 6379})),
        "the redis backend needs a server",
    ),
    (
        "caffe2-redis-host-and-managed",
        caffe2(lambda j: j["spec"]["backendSpecs"].update(manageRedis=True)),
        "set only one of spec.backendSpecs.redisHost and spec.backendSpecs.manageRedis",
    ),
    (
        "caffe2-managed-redis-needs-redis",
        caffe2(
            lambda j: j["spec"].update(
                backendSpecs={"backendType": "nfs", "nfsPath": "/x", "manageRedis": True}
            )
        ),
        "spec.backendSpecs.manageRedis needs backendType: redis",
    ),
    (
        "caffe2-nfs-without-path",
        caffe2(lambda j: j["spec"].update(backendSpecs={"backendType": "nfs"})),
        "backendType nfs needs spec.backendSpecs.nfsPath",
    ),
    (
        "caffe2-backend-type",
        caffe2(lambda j: j["spec"]["backendSpecs"].update(backendType="gloo")),
        'spec.backendSpecs.backendType: Unsupported value: "gloo"',
    ),
    (
        "caffe2-chief-out-of-range",
        caffe2(
            lambda j: j["spec"].update(
                terminationPolicy={"chief": {"replicaName": "WORKER", "replicaIndex": 2}}
            )
        ),
        "spec.terminationPolicy.chief.replicaIndex must be less than spec.replicaSpecs.replicas",
    ),
    (
        "caffe2-chief-not-worker",
        caffe2(
            lambda j: j["spec"].update(
                terminationPolicy={"chief": {"replicaName": "MASTER", "replicaIndex": 0}}
            )
        ),
        "spec.terminationPolicy.chief.replicaName must be WORKER",
    ),
    (
        "caffe2-chief-and-all-workers",
        caffe2(
            lambda j: j["spec"].update(
                terminationPolicy={"chief": {"replicaName": "worker", "replicaIndex": 0}, "allWorkers": True}
            )
        ),
        "set only one of spec.terminationPolicy.chief and spec.terminationPolicy.allWorkers",
    ),
    (
        "caffe2-no-containers",
        caffe2(lambda j: pod(j, "replicaSpecs").update(containers=[])),
        "spec.replicaSpecs.template.spec.containers must list at least one container",
    ),
    (
        "caffe2-empty-image",
        caffe2(lambda j: pod(j, "replicaSpecs")["containers"][0].update(image="")),
        "spec.replicaSpecs.template: container 'caffe2' has no image",
    ),
]


# Jobs unlike the samples that must still be admitted.
GOOD: list[tuple[str, Job]] = [
    (
        "tf-single-worker",
        tf(
            lambda j: (
                tf_specs(j).pop("Chief"),
                tf_specs(j).pop("PS"),
                tf_specs(j)["Worker"].update(replicas=1),
            )
        ),
    ),
    ("tf-replicas-defaulted", tf(lambda j: [s.pop("replicas") for s in tf_specs(j).values()])),
    ("tf-chief-scaled-to-zero", tf(lambda j: tf_specs(j)["Chief"].update(replicas=0))),
    ("tf-longest-name", tf(lambda j: (rename(j, "a" * 54), tf_specs(j)["Worker"].update(replicas=10)))),
    (
        "tf-all-run-policy",
        tf(
            lambda j: j["spec"].update(
                runPolicy={
                    "cleanPodPolicy": "All",
                    "ttlSecondsAfterFinished": 0,
                    "activeDeadlineSeconds": 600,
                    "backoffLimit": 3,
                    "suspend": True,
                    "managedBy": "kubeflow.org/training-operator",
                    "schedulingPolicy": {
                        "minAvailable": 4,
                        "queue": "q",
                        "minResources": {"cpu": "4", "memory": 1024},
                        "priorityClass": "high",
                        "scheduleTimeoutSeconds": 30,
                    },
                }
            )
        ),
    ),
    # training-operator admits these and its defaulter camel-cases them (issue 28).
    ("tf-lowercase-types", tf(lambda j: respell(tf_specs(j), Chief="chief", PS="ps", Worker="worker"))),
    ("tf-uppercase-types", tf(lambda j: respell(tf_specs(j), Chief="CHIEF", PS="Ps", Worker="WORKER"))),
    (
        "mx-lowercase-types",
        mx(
            lambda j: respell(
                j["spec"]["mxReplicaSpecs"], Scheduler="scheduler", Server="server", Worker="worker"
            )
        ),
    ),
    (
        "mx-tune-without-scheduler",
        mx(lambda j: (j["spec"].update(jobMode="MXTune"), j["spec"]["mxReplicaSpecs"].pop("Scheduler"))),
    ),
    (
        "mx-single-worker",
        mx(
            lambda j: (
                j["spec"]["mxReplicaSpecs"].pop("Scheduler"),
                j["spec"]["mxReplicaSpecs"].pop("Server"),
            )
        ),
    ),
    ("paddle-collective-no-ps", paddle(lambda j: j["spec"].pop("ps"))),
    (
        "paddle-elastic",
        paddle(lambda j: (j["spec"].update(elastic=1), j["spec"]["worker"].update(requests=1, limits=4))),
    ),
    (
        "paddle-first-container-any-name",
        paddle(lambda j: pod(j, "worker")["containers"][0].update(name="trainer")),
    ),
    (
        "paddle-run-policy",
        paddle(
            lambda j: (
                j["spec"].pop("cleanPodPolicy"),
                j["spec"].update(runPolicy={"cleanPodPolicy": "Running"}),
            )
        ),
    ),
    (
        "caffe2-single-worker-no-backend",
        caffe2(lambda j: (j["spec"].pop("backendSpecs"), j["spec"]["replicaSpecs"].update(replicas=1))),
    ),
    ("caffe2-default-backend-is-redis", caffe2(lambda j: j["spec"]["backendSpecs"].pop("backendType"))),
    ("caffe2-all-workers", caffe2(lambda j: j["spec"].update(terminationPolicy={"allWorkers": True}))),
    (
        "caffe2-chief-lower-case",
        caffe2(
            lambda j: j["spec"].update(
                terminationPolicy={"chief": {"replicaName": "worker", "replicaIndex": 1}}
            )
        ),
    ),
]


@pytest.mark.parametrize("job", [pytest.param(j, id=i) for i, j in GOOD])
def test_valid_variant_is_admitted(job: Job, namespace: str) -> None:
    result = dry_run(job, namespace)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("job", "expected"), [pytest.param(j, e, id=i) for i, j, e in BAD])
def test_invalid_job_is_refused(job: Job, expected: str, namespace: str) -> None:
    result = dry_run(job, namespace)
    assert result.returncode != 0, f"accepted: {json.dumps(job)}"
    assert expected in result.stderr


def test_caffe2_jobs_whose_worker_names_would_not_fit_are_admitted(namespace: str) -> None:
    # caffe2-operator's worker host names are <namespace>-<job>-worker-<i>; one that would be longer
    # than 63 characters gets a shortened name instead (docs/user-guide-caffe2job.md).
    room = 63 - len(namespace) - 1 - len("-worker-1")
    assert dry_run(caffe2(lambda j: rename(j, "c" * (room + 10))), namespace).returncode == 0


# --- updates -----------------------------------------------------------------------------------


def suspended(job: Job, name: str) -> Job:
    job = copy.deepcopy(job)
    job["metadata"]["name"] = name
    job["spec"].setdefault("runPolicy", {})["suspend"] = True
    return job


# (id, stored job, the update, expected part of the error or None when the update is allowed)
UPDATES: list[tuple[str, Job, Callable[[Job], Any], str | None]] = [
    (
        "tf-add-replica-type",
        tf(lambda j: None),
        lambda j: tf_specs(j).update(Evaluator=copy.deepcopy(tf_specs(j)["Worker"])),
        "the replica types of spec.tfReplicaSpecs are immutable",
    ),
    (
        "tf-remove-replica-type",
        tf(lambda j: None),
        lambda j: tf_specs(j).pop("PS"),
        "the replica types of spec.tfReplicaSpecs are immutable",
    ),
    ("tf-scale-workers", tf(lambda j: None), lambda j: tf_specs(j)["Worker"].update(replicas=4), None),
    # A job stored with lower-case keys stays editable (issue 28).
    (
        "tf-scale-lowercase-workers",
        tf(lambda j: respell(tf_specs(j), PS="ps", Worker="worker")),
        lambda j: tf_specs(j)["worker"].update(replicas=4),
        None,
    ),
    (
        "tf-camel-case-a-lowercase-key",
        tf(lambda j: respell(tf_specs(j), Worker="worker")),
        lambda j: respell(tf_specs(j), worker="Worker"),
        None,
    ),
    (
        "tf-add-the-camel-case-twin",
        tf(lambda j: respell(tf_specs(j), Worker="worker")),
        lambda j: tf_specs(j).update(Worker=copy.deepcopy(tf_specs(j)["worker"])),
        "both name the replica type Worker; keep one of them",
    ),
    (
        "tf-add-a-lowercase-type",
        tf(lambda j: respell(tf_specs(j), Worker="worker")),
        lambda j: tf_specs(j).update(evaluator=copy.deepcopy(tf_specs(j)["worker"])),
        "the replica types of spec.tfReplicaSpecs are immutable",
    ),
    (
        "tf-change-queue",
        tf(lambda j: j["spec"]["runPolicy"].update(schedulingPolicy={"queue": "a"})),
        lambda j: j["spec"]["runPolicy"]["schedulingPolicy"].update(queue="b"),
        "spec.runPolicy.schedulingPolicy.queue is immutable",
    ),
    (
        "tf-set-managed-by",
        tf(lambda j: None),
        lambda j: j["spec"]["runPolicy"].update(managedBy="kueue.x-k8s.io/multikueue"),
        "spec.runPolicy.managedBy is immutable",
    ),
    (
        "mx-remove-managed-by",
        mx(lambda j: j["spec"].update(runPolicy={"managedBy": "kubeflow.org/training-operator"})),
        lambda j: j["spec"]["runPolicy"].pop("managedBy"),
        "spec.runPolicy.managedBy is immutable",
    ),
    (
        "mx-change-job-mode",
        mx(lambda j: None),
        lambda j: j["spec"].update(jobMode="MXTune"),
        "spec.jobMode is immutable",
    ),
    (
        "mx-add-replica-type",
        mx(lambda j: j["spec"]["mxReplicaSpecs"].pop("Server")),
        lambda j: j["spec"]["mxReplicaSpecs"].update(
            Server=copy.deepcopy(j["spec"]["mxReplicaSpecs"]["Worker"])
        ),
        "the replica types of spec.mxReplicaSpecs are immutable",
    ),
    (
        "paddle-change-intranet",
        paddle(lambda j: None),
        lambda j: j["spec"].update(intranet="Service"),
        "spec.intranet is immutable",
    ),
    (
        "paddle-remove-with-gloo",
        paddle(lambda j: None),
        lambda j: j["spec"].pop("withGloo"),
        "spec.withGloo is immutable",
    ),
    (
        "paddle-change-with-gloo",
        paddle(lambda j: None),
        lambda j: j["spec"].update(withGloo=2),
        "spec.withGloo is immutable",
    ),
    (
        "paddle-change-paddle-queue",
        paddle(lambda j: j["spec"].update(schedulingPolicy={"queue": "a"})),
        lambda j: j["spec"]["schedulingPolicy"].update(queue="b"),
        "spec.schedulingPolicy.queue is immutable",
    ),
    ("paddle-scale-workers", paddle(lambda j: None), lambda j: j["spec"]["worker"].update(replicas=3), None),
    (
        "caffe2-change-backend",
        caffe2(lambda j: None),
        lambda j: j["spec"]["backendSpecs"].update(redisHost="other-redis"),
        "spec.backendSpecs is immutable",
    ),
    (
        "caffe2-remove-backend",
        edit("caffe2job_managed_redis.yaml", lambda j: j["spec"]["replicaSpecs"].update(replicas=1)),
        lambda j: j["spec"].pop("backendSpecs"),
        "spec.backendSpecs is immutable",
    ),
    ("caffe2-scale", caffe2(lambda j: None), lambda j: j["spec"]["replicaSpecs"].update(replicas=4), None),
]


@pytest.mark.parametrize(
    ("stored", "update", "expected"), [pytest.param(s, u, e, id=i) for i, s, u, e in UPDATES]
)
def test_update(
    stored: Job, update: Callable[[Job], Any], expected: str | None, namespace: str, request
) -> None:
    name = request.node.callspec.id
    stored = suspended(stored, name)
    create(stored, namespace)
    changed = copy.deepcopy(stored)
    update(changed)
    result = dry_run(changed, namespace)
    if expected is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, f"update accepted: {json.dumps(changed)}"
        assert expected in result.stderr


def test_metadata_update_of_stored_job_is_not_rechecked(namespace: str) -> None:
    # The policies only look at a written spec: labelling a stored job must always work.
    job = suspended(sample("paddlejob_resnet.yaml"), "relabel")
    create(job, namespace)
    result = kubectl("label", "-n", namespace, "paddlejob", "relabel", "team=vision")
    assert result.returncode == 0, result.stderr


# --- discovery and printing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("short", "kind"), [("tfj", "TFJob"), ("mxj", "MXJob"), ("pdj", "PaddleJob"), ("c2j", "Caffe2Job")]
)
def test_short_names(short: str, kind: str, namespace: str) -> None:
    result = kubectl("get", short, "-n", namespace, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == "List"
    explained = kubectl("explain", short)
    assert f"KIND:       {kind}" in explained.stdout or f"KIND:     {kind}" in explained.stdout


def test_state_column_shows_last_condition(namespace: str) -> None:
    job = suspended(sample("tfjob_smoke_gpu.yaml"), "state-column")
    create(job, namespace)
    status = {
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "TFJobCreated"},
                {"type": "Suspended", "status": "True", "reason": "TFJobSuspended"},
            ]
        }
    }
    patched = kubectl(
        "patch",
        "-n",
        namespace,
        "tfjob",
        "state-column",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    assert patched.returncode == 0, patched.stderr
    # An operator watching the namespace may write its own conditions in between: the column must
    # show whichever condition is last, so compare the table with the object until both agree.
    for _ in range(10):
        table = kubectl("get", "-n", namespace, "tfjob", "state-column", check=True).stdout.splitlines()
        obj = kubectl("get", "-n", namespace, "tfjob", "state-column", "-o", "json", check=True).stdout
        if table[1].split()[1] == json.loads(obj)["status"]["conditions"][-1]["type"]:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the State column never showed the last condition: {table}")
    assert table[0].split() == ["NAME", "STATE", "AGE"]


def test_paddlejob_columns(namespace: str) -> None:
    job = suspended(sample("paddlejob_resnet.yaml"), "columns")
    create(job, namespace)
    header = kubectl("get", "-n", namespace, "pdj", "columns", check=True).stdout.splitlines()[0]
    assert header.split() == ["NAME", "STATUS", "MODE", "STATE", "AGE"]


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("tfjobs.spec.tfReplicaSpecs", "Chief, Master, PS, Worker, Evaluator"),
        ("tfjobs.spec.runPolicy.cleanPodPolicy", "None"),
        ("mxjobs.spec.jobMode", "MXTune"),
        ("paddlejobs.spec.withGloo", "Gloo"),
        ("caffe2jobs.spec.backendSpecs.manageRedis", "Redis"),
        # Pod templates are typed: explain reaches container fields (a map's values have no key in the path).
        ("tfjobs.spec.tfReplicaSpecs.template.spec.containers.resources", "limits <map[string]Object>"),
        ("paddlejobs.spec.worker.template.spec.containers.ports", "protocol <string>"),
        ("caffe2jobs.spec.replicaSpecs.template.metadata", "labels <map[string]string>"),
    ],
)
def test_explain_teaches_the_api(field: str, expected: str) -> None:
    result = kubectl("explain", field)
    assert result.returncode == 0, result.stderr
    assert expected in " ".join(result.stdout.split())


def typo_in_worker_template() -> Job:
    job = sample("tfjob_dist.yaml")
    pod(job, "tfReplicaSpecs", "Worker")["containers"][0]["resources"] = {"limit": {"nvidia.com/gpu": 1}}
    return job


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("create", 'unknown field "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limit"'),
        ("apply", 'unknown field "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limit"'),
        (
            "apply --server-side",
            '.spec.tfReplicaSpecs.Worker.template.spec.containers[name="tensorflow"].resources.limit: '
            "field not declared in schema",
        ),
    ],
)
def test_a_typo_in_a_pod_template_is_refused_with_its_path(how: str, expected: str, namespace: str) -> None:
    """resources.limit for limits (issue #15): kubectl validates strictly, the typed template refuses it."""
    result = kubectl(
        *how.split(),
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(typo_in_worker_template()),
    )
    assert result.returncode != 0, result.stdout
    assert expected in result.stderr, result.stderr


def test_a_client_that_skips_validation_gets_the_typo_pruned_with_a_warning(namespace: str) -> None:
    result = kubectl(
        "create",
        "--validate=warn",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        "-",
        stdin=json.dumps(typo_in_worker_template()),
    )
    assert result.returncode == 0, result.stderr
    assert "resources.limit" in result.stderr, result.stderr
    stored = json.loads(result.stdout)
    assert pod(stored, "tfReplicaSpecs", "Worker")["containers"][0]["resources"] == {}
