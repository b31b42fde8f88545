"""A v1 job as a TrainJob (``trainer_jobs.convert``, the command ``hack/convert-to-trainjob.py``).

Every TrainJob it writes must pass the TrainJob CRD's schema and render, through this engine, on
its built-in runtime (``tests/trainer_runtimes.py``) into a JobSet whose pods get their
framework's env with the v1 job's world size; every field that does not carry over is a note.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_crds import violations
from test_trainer_api import RESERVED, root
from trainer_jobs.convert import MANAGER, Refused, convert, documents
from trainer_jobs.render import render
from trainer_runtimes import (
    container,
    deepspeed_distributed,
    jax_distributed,
    pod,
    torch_distributed,
    trainjob,
    xgboost_distributed,
)

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "docker.io/library/busybox:1.36"
RUNTIMES = {
    "torch-distributed": torch_distributed,
    "xgboost-distributed": xgboost_distributed,
    "jax-distributed": jax_distributed,
    "deepspeed-distributed": deepspeed_distributed,
}
FIELDS = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch", ("Master", "Worker")),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboost", ("Master", "Worker")),
    "JAXJob": ("jaxReplicaSpecs", "jax", ("Worker",)),
    "MPIJob": ("mpiReplicaSpecs", "mpi", ("Launcher", "Worker")),
}


def replica(count: int, name: str, **fields: Any) -> dict[str, Any]:
    main = {"name": name, "image": IMAGE, "command": ["python", "train.py"], **fields}
    return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [main]}}}


def v1(kind: str, counts: tuple[int, ...] = (1, 2), api_version: str = "kubeflow.org/v1", **spec: Any):
    """A v1 job of ``kind``: its replica types (first to last) with ``counts`` replicas each."""
    field, name, types = FIELDS.get(kind, (f"{kind.lower()}ReplicaSpecs", kind.lower(), ("Master", "Worker")))
    specs = {rtype: replica(n, name) for rtype, n in zip(types[-len(counts) :], counts, strict=True)}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {field: specs, **spec},
    }


def served(converted: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob as the API server would serve it (its CRD's defaults)."""
    spec = copy.deepcopy(converted["spec"])
    return trainjob(spec["runtimeRef"]["name"], converted["metadata"]["name"], **spec)


def rendered_env(converted: dict[str, Any], job: str = "node") -> dict[str, Any]:
    runtime = RUNTIMES[converted["spec"]["runtimeRef"]["name"]]()
    js = render(served(converted), runtime).jobset
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(js, job).get("env") or []}


def main_container(job: dict[str, Any], rtype: str) -> dict[str, Any]:
    field = FIELDS[job["kind"]][0]
    return job["spec"][field][rtype]["template"]["spec"]["containers"][0]


# --- one row per kind ------------------------------------------------------------------------------

# (kind, replica counts, spec, the trainer expected, the rendered job, env expected in its container node)
KINDS = [
    (
        "PyTorchJob",
        (1, 2),
        {"nprocPerNode": "2"},
        {"numNodes": 3, "numProcPerNode": 2},
        "node",
        {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "2", "PET_MASTER_ADDR": "job-node-0-0.job"},
    ),
    (
        "XGBoostJob",
        (1, 3),
        {},
        {"numNodes": 4},
        "node",
        {"DMLC_NUM_WORKER": "4", "DMLC_TRACKER_URI": "job-node-0-0.job", "DMLC_TRACKER_PORT": "29500"},
    ),
    (
        "JAXJob",
        (2,),
        {},
        {"numNodes": 2},
        "node",
        {"JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": "job-node-0-0.job:29500"},
    ),
    (
        "MPIJob",
        (1, 2),
        {"slotsPerWorker": 2},
        {"numNodes": 2, "numProcPerNode": 2},
        "launcher",
        {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_set_default_slots": "2"},
    ),
]


@pytest.mark.parametrize(
    ("kind", "counts", "spec", "trainer", "job", "env"), KINDS, ids=[k[0] for k in KINDS]
)
def test_a_kind_becomes_a_trainjob_on_its_runtime(kind, counts, spec, trainer, job, env):
    converted = convert(v1(kind, counts, **spec))
    tj = converted.trainjob
    assert tj["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and tj["kind"] == "TrainJob"
    assert tj["metadata"] == {"name": "job", "namespace": "ns"}
    assert tj["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert tj["spec"]["trainer"] == {"image": IMAGE, "command": ["python", "train.py"], **trainer}
    assert violations({**tj, "metadata": {}}, root("TrainJob"), "") == []
    got = rendered_env(tj, job)
    assert {k: got.get(k) for k in env} == env
    assert converted.notes, "every kind says how its env changes"
    assert not [n for n in converted.notes if "restartPolicy" in n], "OnFailure is the runtimes' own"


@pytest.mark.parametrize(
    ("kind", "runtime"),
    [
        ("PyTorchJob", "torch-distributed"),
        ("XGBoostJob", "xgboost-distributed"),
        ("JAXJob", "jax-distributed"),
        ("MPIJob", "deepspeed-distributed"),
    ],
)
def test_the_runtime_is_a_built_in_one(kind, runtime):
    assert (
        convert(v1(kind, (1, 1) if kind != "JAXJob" else (1,))).trainjob["spec"]["runtimeRef"]["name"]
        == runtime
    )
    built_in = {
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in (ROOT / "config" / "runtimes").glob("*_*.yaml")
    }
    assert runtime in built_in


def test_mpi_the_launcher_runs_the_command_and_the_workers_the_runtimes_ssh_server():
    job = v1("MPIJob", (1, 3), slotsPerWorker=4)
    main_container(job, "Worker")["resources"] = {"limits": {"cpu": "4"}}
    tj = convert(job).trainjob
    assert tj["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"cpu": "4"}}, "the workers' resources"
    js = render(served(tj), deepspeed_distributed())
    launcher, worker = container(js.jobset, "launcher"), container(js.jobset, "node")
    assert launcher["command"] == ["python", "train.py"] and launcher["image"] == IMAGE
    assert worker["command"] == ["/usr/sbin/sshd"], "the runtime's image and command"
    assert js.hostfile["data"]["hostfile"] == (
        "job-node-0-0.job slots=4\njob-node-0-1.job slots=4\njob-launcher-0-0.job slots=4\n"
    ), "three hosts, as the v1 job's three workers"


# --- one row per field that changes or does not carry over -----------------------------------------


def with_container(rtype: str = "Master", **fields: Any):
    def change(job):
        main_container(job, rtype).update(fields)

    return change


def with_pod(rtype: str = "Master", **fields: Any):
    def change(job):
        field = FIELDS[job["kind"]][0]
        for t in [rtype] if rtype else list(job["spec"][field]):
            job["spec"][field][t]["template"]["spec"].update(copy.deepcopy(fields))

    return change


def with_spec(**fields: Any):
    return lambda job: job["spec"].update(fields)


def with_run_policy(**fields: Any):
    return lambda job: job["spec"].setdefault("runPolicy", {}).update(fields)


def with_metadata(**fields: Any):
    return lambda job: job["metadata"].update(fields)


def sidecar(job):
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"].append(
        {"name": "log", "image": IMAGE}
    )


def unnamed(job):
    for rtype in ("Master", "Worker"):
        main_container(job, rtype)["name"] = "trainer"


def differing_worker(job):
    main_container(job, "Worker")["args"] = ["--other"]


def lowercase_keys(job):
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {k.lower(): v for k, v in specs.items()}


VOLUMES = [{"name": "data", "emptyDir": {"medium": "Memory"}}]
MOUNTS = [{"name": "data", "mountPath": "/data"}]
TOLERATIONS = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}  # fmt: skip
SECRET = {"secretKeyRef": {"name": "s", "key": "k"}}


def patched_pod(spec: dict[str, Any]) -> dict[str, Any]:
    [patch] = spec["runtimePatches"]
    assert patch["manager"] == MANAGER
    [rjob] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == "node"
    return rjob["template"]["spec"]["template"]


# (id, kind, the change to the v1 job, {path in the TrainJob's spec: value} (None: absent), a note's words)
ROWS = [
    ("env", "PyTorchJob", with_container(env=[{"name": "EPOCHS", "value": "3"}, {"name": "TOKEN", "valueFrom": SECRET}]),
     {"trainer.env": [{"name": "EPOCHS", "value": "3"}, {"name": "TOKEN", "valueFrom": SECRET}]}, None),
    ("reserved env torch", "PyTorchJob", with_container(env=[{"name": "PET_NNODES", "value": "9"}, {"name": "A", "value": "1"}]),
     {"trainer.env": [{"name": "A", "value": "1"}]}, "env PET_NNODES is dropped"),
    ("reserved env xgboost", "XGBoostJob", with_container(env=[{"name": "DMLC_NUM_WORKER", "value": "9"}]),
     {"trainer.env": None}, "env DMLC_NUM_WORKER is dropped"),
    ("reserved env mpi", "MPIJob", with_container("Launcher", env=[{"name": "OMPI_MCA_plm_rsh_args", "value": "x"}]),
     {"trainer.env": None}, "env OMPI_MCA_plm_rsh_args is dropped"),
    ("envFrom", "PyTorchJob", with_container(envFrom=[{"configMapRef": {"name": "c"}}]), {}, "envFrom is dropped"),
    ("args", "PyTorchJob", with_container(args=["--epochs", "3"]), {"trainer.args": ["--epochs", "3"]}, None),
    ("resources", "PyTorchJob", with_container(resources={"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}),
     {"trainer.resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}}, None),
    ("resource claims", "PyTorchJob", with_container(resources={"claims": [{"name": "gpu"}]}),
     {"trainer.resourcesPerNode": None}, "resources.claims are dropped"),
    ("ports", "PyTorchJob", with_container(ports=[{"name": "pytorchjob-port", "containerPort": 23456}]), {},
     "ports are dropped: the torch-distributed runtime opens its framework's, 29500"),
    ("mpi ports", "MPIJob", with_container("Launcher", ports=[{"containerPort": 2222}]), {},
     "Launcher: container 'mpi': ports are dropped: the deepspeed-distributed runtime opens SSH's"),
    ("workingDir", "PyTorchJob", with_container(workingDir="/src"), {}, "workingDir is dropped"),
    ("probe", "PyTorchJob", with_container(readinessProbe={"exec": {"command": ["true"]}}), {}, "readinessProbe is dropped"),
    ("sidecar", "PyTorchJob", sidecar, {}, "container 'log' is dropped"),
    ("init container", "PyTorchJob", with_pod(initContainers=[{"name": "wait", "image": IMAGE}]), {},
     "init container 'wait' is dropped"),
    ("no framework container", "PyTorchJob", unnamed, {"trainer.image": IMAGE},
     "no container named 'pytorch'; the first, 'trainer', is the trainer"),
    ("volumes", "PyTorchJob", lambda job: (with_pod(volumes=VOLUMES)(job), with_container(volumeMounts=MOUNTS)(job)),
     {"runtimePatches.0.trainingRuntimeSpec.template.spec.replicatedJobs.0.template.spec.template.spec":
      {"volumes": VOLUMES, "containers": [{"name": "node", "volumeMounts": MOUNTS}]}}, None),
    ("scheduling", "PyTorchJob", with_pod(nodeSelector={"pool": "gpu"}, tolerations=TOLERATIONS, affinity=AFFINITY),
     {"runtimePatches.0.trainingRuntimeSpec.template.spec.replicatedJobs.0.template.spec.template.spec":
      {"nodeSelector": {"pool": "gpu"}, "affinity": AFFINITY, "tolerations": TOLERATIONS}}, None),
    ("service account", "PyTorchJob", with_pod(serviceAccountName="trainer", imagePullSecrets=[{"name": "reg"}]),
     {"runtimePatches.0.trainingRuntimeSpec.template.spec.replicatedJobs.0.template.spec.template.spec":
      {"serviceAccountName": "trainer", "imagePullSecrets": [{"name": "reg"}]}}, None),
    ("priority class", "PyTorchJob", with_pod(priorityClassName="high"), {"runtimePatches": None},
     "the pod's priorityClassName is dropped"),
    ("host network", "PyTorchJob", with_pod(hostNetwork=True), {"runtimePatches": None}, "the pod's hostNetwork is dropped"),
    ("suspend", "PyTorchJob", with_run_policy(suspend=True), {"suspend": True}, None),
    ("deadline", "PyTorchJob", with_run_policy(activeDeadlineSeconds=600), {"activeDeadlineSeconds": 600}, None),
    ("multikueue", "PyTorchJob", with_run_policy(managedBy="kueue.x-k8s.io/multikueue"),
     {"managedBy": "kueue.x-k8s.io/multikueue"}, None),
    ("managedBy other", "PyTorchJob", with_run_policy(managedBy="example.com/other"), {"managedBy": None},
     "runPolicy.managedBy 'example.com/other' is dropped"),
    ("cleanPodPolicy", "PyTorchJob", with_run_policy(cleanPodPolicy="All"), {}, "runPolicy.cleanPodPolicy is dropped"),
    ("ttl", "PyTorchJob", with_run_policy(ttlSecondsAfterFinished=60), {}, "runPolicy.ttlSecondsAfterFinished is dropped"),
    ("backoffLimit", "PyTorchJob", with_run_policy(backoffLimit=3), {}, "runPolicy.backoffLimit is dropped"),
    ("schedulingPolicy", "PyTorchJob", with_run_policy(schedulingPolicy={"minAvailable": 3, "queue": "q"}), {},
     "runPolicy.schedulingPolicy is dropped"),
    ("mpi cleanPodPolicy", "MPIJob", with_spec(cleanPodPolicy="Running"), {}, "spec.cleanPodPolicy is dropped"),
    ("elasticPolicy", "PyTorchJob", with_spec(elasticPolicy={"minReplicas": 1, "maxReplicas": 4}), {"trainer.numNodes": 3},
     "elasticPolicy is dropped"),
    ("elastic nproc", "PyTorchJob", with_spec(elasticPolicy={"nProcPerNode": 4}), {"trainer.numProcPerNode": 4}, None),
    ("nproc auto", "PyTorchJob", with_spec(nprocPerNode="auto"), {"trainer.numProcPerNode": None},
     "nprocPerNode 'auto'"),
    ("nproc left out", "PyTorchJob", lambda job: None, {"trainer.numProcPerNode": None}, "nprocPerNode left out"),
    ("restartPolicy", "JAXJob", lambda job: job["spec"]["jaxReplicaSpecs"]["Worker"].update(restartPolicy="ExitCode"), {},
     "Worker: restartPolicy ExitCode is dropped"),
    ("templates differ", "PyTorchJob", differing_worker, {"trainer.args": None},
     "the Worker template differs from the Master's"),
    ("lowercase replica types", "PyTorchJob", lowercase_keys, {"trainer.numNodes": 3}, None),
    ("mpi main container", "MPIJob", lambda job: (unnamed_mpi(job), job["spec"].update(mainContainer="main")),
     {"trainer.image": IMAGE}, None),
    ("mpi worker env", "MPIJob", with_container("Worker", env=[{"name": "W", "value": "1"}]), {"trainer.env": None},
     "Worker: its env is dropped"),
    ("mpi launcher only", "MPIJob", lambda job: job["spec"]["mpiReplicaSpecs"].pop("Worker"), {"trainer.numNodes": 1},
     "numNodes is 1"),
    ("labels", "PyTorchJob", with_metadata(labels={"kueue.x-k8s.io/queue-name": "q", "training.ato.dev/finished": "true"},
     annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}), {},
     "label training.ato.dev/finished is dropped"),
]  # fmt: skip


def unnamed_mpi(job):
    for rtype in ("Launcher", "Worker"):
        main_container(job, rtype)["name"] = "main"


def spec_at(spec: dict[str, Any], path: str) -> Any:
    node: Any = spec
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)] if int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        if node is None:
            return None
    return node


def counts_of(kind: str) -> tuple[int, ...]:
    return (2,) if kind == "JAXJob" else (1, 2)


@pytest.mark.parametrize(
    ("kind", "change", "expected", "note"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_a_field_carries_over_or_is_a_note(kind, change, expected, note):
    job = v1(kind, counts_of(kind))
    change(job)
    converted = convert(job)
    spec = converted.trainjob["spec"]
    for path, value in expected.items():
        assert spec_at(spec, path) == value, path
    if note is not None:
        assert [n for n in converted.notes if note in n], converted.notes
    assert violations({**converted.trainjob, "metadata": {}}, root("TrainJob"), "") == []
    framework = {"torch-distributed": "torch", "deepspeed-distributed": "mpi"}.get(
        spec["runtimeRef"]["name"], ""
    )
    reserved = set(RESERVED.get(framework, []))
    assert not reserved & {e["name"] for e in spec["trainer"].get("env") or []}
    rendered_env(converted.trainjob, "launcher" if kind == "MPIJob" else "node")  # renders


def test_the_patch_reaches_the_pods_of_the_jobset():
    job = v1("PyTorchJob")
    with_pod(rtype="", volumes=VOLUMES, nodeSelector={"pool": "gpu"}, tolerations=TOLERATIONS)(job)
    for rtype in ("Master", "Worker"):
        main_container(job, rtype)["volumeMounts"] = MOUNTS
        job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["metadata"] = {"labels": {"app": "x"}}
    tj = convert(job).trainjob
    assert patched_pod(tj["spec"])["metadata"] == {"labels": {"app": "x"}}
    js = render(served(tj), torch_distributed()).jobset
    spec = pod(js)
    assert (spec["volumes"], spec["nodeSelector"], spec["tolerations"]) == (
        VOLUMES,
        {"pool": "gpu"},
        TOLERATIONS,
    )
    assert container(js)["volumeMounts"] == MOUNTS
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"] == {
        "app": "x"
    }


def test_metadata_keeps_what_the_user_wrote():
    job = v1("JAXJob", (1,))
    job["metadata"].update(
        uid="u",
        resourceVersion="5",
        generation=2,
        creationTimestamp="2026-01-01T00:00:00Z",
        labels={"kueue.x-k8s.io/queue-name": "q", "training.ato.dev/idle": "x"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
    )
    job["status"] = {"conditions": []}
    tj = convert(job).trainjob
    assert tj["metadata"] == {
        "name": "job",
        "namespace": "ns",
        "labels": {"kueue.x-k8s.io/queue-name": "q"},
        "annotations": {"team": "a"},
    }
    assert "status" not in tj


# --- refusals --------------------------------------------------------------------------------------

REFUSALS = [
    ("TFJob", v1("TFJob"), "no built-in runtime for TensorFlow. Either keep the TFJob"),
    ("PaddleJob", v1("PaddleJob"), "no built-in runtime for Paddle. Either keep the PaddleJob"),
    ("paddle-operator", v1("PaddleJob", api_version="batch.paddlepaddle.org/v1"), "Paddle (paddle-operator's PaddleJob)"),
    ("MXJob", v1("MXJob"), "no built-in runtime for MXNet"),
    ("Caffe2Job", v1("Caffe2Job", api_version="kubeflow.org/v1alpha1"), "no built-in runtime for Caffe2"),
    ("TrainJob", trainjob(), "already a TrainJob"),
    ("another kind", {"apiVersion": "batch/v1", "kind": "Job"}, "Job (batch/v1) is not a kubeflow.org/v1 job"),
    ("not a map", ["a"], "not a Kubernetes object"),
    ("no replicas", {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "j"}, "spec": {}},
     "JAXJob j: spec.jaxReplicaSpecs is empty"),
    ("unknown type", v1("JAXJob", (1,), jaxReplicaSpecs={"Chief": replica(1, "jax")}), "replica type 'Chief'"),
    ("no launcher", v1("MPIJob", (2,)), "needs a Launcher"),
    ("no container", v1("JAXJob", (1,), jaxReplicaSpecs={"Worker": {"template": {"spec": {"containers": []}}}}),
     "JAXJob job: the Worker template has no container"),
]  # fmt: skip


@pytest.mark.parametrize(("job", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_what_has_no_trainjob_is_refused_with_what_to_do(job, message):
    with pytest.raises(Refused, match=None) as refused:
        convert(job)
    assert message in str(refused.value)


def test_a_list_gives_its_items():
    items = [v1("JAXJob", (1,)), v1("MPIJob")]
    assert documents([None, {"apiVersion": "v1", "kind": "List", "items": items}, items[0]]) == [
        *items,
        items[0],
    ]


# --- the command ------------------------------------------------------------------------------------


def run_command(stdin: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "hack" / "convert-to-trainjob.py"), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)


def test_the_command_writes_trainjobs_and_notes_and_fails_on_a_refusal():
    stream = yaml.safe_dump_all([v1("PyTorchJob"), v1("TFJob"), v1("JAXJob", (2,))])
    done = run_command(stream)
    assert done.returncode == 1
    out = list(yaml.safe_load_all(done.stdout))
    assert [(d["kind"], d["spec"]["runtimeRef"]["name"]) for d in out] == [
        ("TrainJob", "torch-distributed"),
        ("TrainJob", "jax-distributed"),
    ]
    assert out[0] == convert(v1("PyTorchJob")).trainjob
    assert "TFJob/job: not converted: TFJob (kubeflow.org/v1)" in done.stderr
    assert "PyTorchJob/job: the pods get torchrun's PET_NNODES" in done.stderr


def test_the_command_reads_json_files(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(v1("XGBoostJob")))
    done = run_command("", str(path))
    assert done.returncode == 0, done.stderr
    [tj] = yaml.safe_load_all(done.stdout)
    assert tj["spec"]["trainer"]["numNodes"] == 3


def test_the_guides_example_is_what_the_command_writes():
    """docs/user-guide-trainjob.md, "An example": the v1 job, its TrainJob and the notes, as written there."""
    text = (ROOT / "docs" / "user-guide-trainjob.md").read_text()
    section = text[text.index("### An example") : text.index("### What carries over")]
    v1_yaml, trainjob_yaml = section.split("```yaml\n")[1:3]
    converted = convert(yaml.safe_load(v1_yaml.split("```")[0]))
    assert converted.trainjob == yaml.safe_load(trainjob_yaml.split("```")[0])
    stderr = section.split("with, on stderr:\n\n```\n")[1].split("```")[0]
    assert stderr.splitlines() == [f"PyTorchJob/mnist: {note}" for note in converted.notes]
