"""Kubeflow's Python SDK for Trainer v2 (`kubeflow` 0.5.0, ``TrainerClient``) drives this operator as
its users drive upstream's Trainer v2.3.0: it lists and reads the runtimes, trains a Python
function (``CustomTrainer``) and a container (``CustomTrainerContainer``), follows each TrainJob
with ``get_job``/``wait_for_job_status`` from Created through Running to Complete, lists and deletes
them; and it finds Trainer's version where upstream's install puts it (``kubeflow-trainer-public``). The JobSet is JobSet v0.12.0's (hack/jobset.sh), the pods KWOK's: they carry no KWOK fate,
so each test ends them itself. ``get_job_logs`` is left out: KWOK's pods have no logs.

What the SDK reports is derived from the TrainJob (its conditions, ``spec.trainer.numNodes``), its
runtime and its pods (``jobset.sigs.k8s.io/*`` labels, phases, resources, ``PET_NPROC_PER_NODE``),
so each report is compared whole with what upstream's objects give it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import replace

import pytest
import yaml
from kube import HANG_S, KUBECTL, ROOT, finish_pod, get, kubectl, namespace_fixture, wait_for
from kubeflow.trainer import (
    CustomTrainer,
    CustomTrainerContainer,
    KubernetesBackendConfig,
    Runtime,
    RuntimeKind,
    RuntimeTrainer,
    TrainerClient,
    TrainerType,
)
from kubeflow.trainer.constants import constants
from kubeflow.trainer.options import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    Name,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)
from kubeflow.trainer.types.types import Step, TrainJob

pytestmark = pytest.mark.trainer

NS = "ato-trainer-sdk"
namespace = namespace_fixture(NS)
IMAGE = "docker.io/library/busybox:1.36"
RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
LOCAL_RUNTIME = "jax-local"
CREATED, RUNNING, COMPLETE = (
    constants.TRAINJOB_CREATED,
    constants.TRAINJOB_RUNNING,
    constants.TRAINJOB_COMPLETE,
)


def train_fn(learning_rate: float) -> None:
    """What CustomTrainer ships: the SDK puts this function's source into the trainer's command."""
    print(f"training with learning rate {learning_rate}")


@pytest.fixture(scope="module")
def local_runtime(namespace):
    """A namespaced TrainingRuntime: upstream's jax-distributed, in this namespace."""
    with open(ROOT / "config" / "runtimes" / "jax_distributed.yaml") as f:
        runtime = yaml.safe_load(f)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"].update(name=LOCAL_RUNTIME, namespace=NS)
    kubectl("apply", "-f", "-", stdin=json.dumps(runtime))
    return LOCAL_RUNTIME


@pytest.fixture(scope="module")
def client(namespace):
    return TrainerClient(KubernetesBackendConfig(namespace=NS, config_file=os.environ["KUBECONFIG"]))


@pytest.fixture(scope="module")
def trained() -> dict[str, str]:
    """TrainJob name -> runtime name, of the jobs the tests trained (for list_jobs)."""
    return {}


def runtime(
    name: str, framework: str, image: str, command: tuple, kind=RuntimeKind.CLUSTER_TRAINING_RUNTIME, **extra
):
    trainer = RuntimeTrainer(TrainerType.CUSTOM_TRAINER, framework, image, num_nodes=1, **extra)
    trainer.set_command(command)
    return Runtime(name=name, trainer=trainer, kind=kind)


RELEASE = "ghcr.io/kubeflow/trainer"
# What the SDK makes of Trainer v2.3.0's built-in runtimes: MPI's device count is numProcPerNode.
RUNTIMES = {
    "torch-distributed": runtime(
        "torch-distributed", "torch", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime", constants.TORCH_COMMAND
    ),
    "deepspeed-distributed": runtime(
        "deepspeed-distributed", "deepspeed", f"{RELEASE}/deepspeed-runtime:v2.3.0", constants.MPI_COMMAND,
        device_count="1",
    ),
    "mlx-distributed": runtime(
        "mlx-distributed", "mlx", f"{RELEASE}/mlx-runtime:v2.3.0", constants.MPI_COMMAND, device_count="1"
    ),
    "jax-distributed": runtime("jax-distributed", "jax", "nvcr.io/nvidia/jax:25.10-py3", constants.DEFAULT_COMMAND),
    "xgboost-distributed": runtime(
        "xgboost-distributed", "xgboost", f"{RELEASE}/xgboost-runtime:v2.3.0", constants.DEFAULT_COMMAND
    ),
    LOCAL_RUNTIME: runtime(
        LOCAL_RUNTIME, "jax", "nvcr.io/nvidia/jax:25.10-py3", constants.DEFAULT_COMMAND,
        kind=RuntimeKind.TRAINING_RUNTIME,
    ),
}  # fmt: skip


# Where the SDK reads Trainer's version (kubeflow/trainer/backends/kubernetes/backend.py,
# verify_backend): its only use of it is a warning when it cannot read it.
SDK_BACKEND_LOGGER = "kubeflow.trainer.backends.kubernetes.backend"
PUBLIC = "kubeflow-trainer-public"
NO_VERSION = "Trainer control-plane version info is not available"


def sdk_warnings(caplog, kubeconfig: str) -> list[str]:
    """The SDK's backend warnings while a client is made with ``kubeconfig``."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=SDK_BACKEND_LOGGER):
        TrainerClient(KubernetesBackendConfig(namespace=NS, config_file=kubeconfig))
    return [r.getMessage() for r in caplog.records if r.name == SDK_BACKEND_LOGGER]


@pytest.fixture(scope="module")
def plain_user_kubeconfig(namespace, tmp_path_factory) -> str:
    """A kubeconfig of a ServiceAccount with no role at all: any authenticated user."""
    kubectl("create", "serviceaccount", "-n", NS, "plain-user", check=False)
    token = kubectl("create", "token", "-n", NS, "plain-user", "--duration=1h").stdout.strip()
    config = yaml.safe_load(kubectl("config", "view", "--minify", "--raw").stdout)
    config["users"] = [{"name": "plain-user", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "plain-user"
    path = tmp_path_factory.mktemp("plain-user") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_sdk_reads_trainers_version_as_from_upstreams_install(caplog, plain_user_kubeconfig):
    """The ConfigMap make deploy, the bundle and make install/run install: Trainer v2.3.0's name,
    namespace and key, readable by every authenticated user, so no client warns (as with upstream's
    install); the SDK reports the version nowhere else. KUBEFLOW_SYSTEM_NAMESPACE elsewhere warns."""
    data = get("configmap", "-n", "kubeflow-system", PUBLIC)["data"]
    assert data == {"kubeflow_trainer_version": "v2.3.0"}
    assert sdk_warnings(caplog, os.environ["KUBECONFIG"]) == []
    assert sdk_warnings(caplog, plain_user_kubeconfig) == []
    as_user = [KUBECTL, "--kubeconfig", plain_user_kubeconfig, "get", "configmap", "-n", "kubeflow-system"]
    assert subprocess.run([*as_user, PUBLIC], capture_output=True).returncode == 0
    listed = subprocess.run(as_user, capture_output=True, text=True)
    assert "forbidden" in listed.stderr, "the Role grants that one ConfigMap, not the namespace's list"


def test_the_sdk_warns_without_trainers_version(caplog, monkeypatch):
    """What the ConfigMap saves a user from: the SDK's warning, where it cannot find it."""
    monkeypatch.setenv("KUBEFLOW_SYSTEM_NAMESPACE", NS)
    (warning,) = sdk_warnings(caplog, os.environ["KUBECONFIG"])
    assert NO_VERSION in warning and f"'{PUBLIC}' in namespace '{NS}'" in warning


def test_the_sdk_lists_and_reads_the_runtimes(client, local_runtime):
    listed = {r.name: r for r in client.list_runtimes()}
    assert {name: listed.get(name) for name in RUNTIMES} == RUNTIMES
    for name, expected in RUNTIMES.items():
        assert client.get_runtime(name) == expected


def jobset(name: str) -> dict | None:
    found = kubectl("get", "jobsets.jobset.x-k8s.io", "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def pods(name: str, terminating: bool = False) -> list[dict]:
    items = get("pods", "-n", NS, "-l", f"jobset.sigs.k8s.io/jobset-name={name}")["items"]
    return [p for p in items if terminating or not p["metadata"].get("deletionTimestamp")]


def container(spec: dict, name: str = "node") -> dict:
    return next(c for c in spec["containers"] if c["name"] == name)


def job_container(js: dict, job: str = "node") -> dict:
    rjob = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == job)
    return container(rjob["template"]["spec"]["template"]["spec"])


def env(c: dict) -> dict:
    """Name -> value (or valueFrom), without the API server's fieldRef apiVersion and the Job
    controller's JOB_COMPLETION_INDEX."""
    found = {}
    for e in c.get("env") or []:
        value = e.get("value", e.get("valueFrom"))
        if isinstance(value, dict) and "fieldRef" in value:
            value = {"fieldRef": {k: v for k, v in value["fieldRef"].items() if k != "apiVersion"}}
        if e["name"] != "JOB_COMPLETION_INDEX":
            found[e["name"]] = value
    return found


def step_name(pod: dict, mpi: bool) -> str:
    """The SDK's step of a trainer pod: node-<index>, MPI's node pods one up (the launcher is node-0)."""
    labels = pod["metadata"]["labels"]
    index = int(labels[constants.JOB_INDEX_LABEL])
    shift = 1 if mpi and labels[constants.JOBSET_RJOB_NAME_LABEL] == constants.NODE else 0
    return f"node-{index + shift}"


def steps(job: TrainJob) -> list[Step]:
    return sorted(job.steps, key=lambda s: s.name)


def expected_steps(name: str, phase: str, device=("Unknown", "Unknown"), mpi: bool = False) -> list[Step]:
    found = [
        Step(step_name(p, mpi), phase, p["metadata"]["name"], *device)
        for p in pods(name)
        if p["metadata"]["labels"][constants.JOBSET_RJOB_NAME_LABEL] in (constants.NODE, constants.LAUNCHER)
    ]
    return sorted(found, key=lambda s: s.name)


def follow(client: TrainerClient, name: str, status: str) -> tuple[TrainJob, list[str]]:
    """Wait through the SDK for ``status``; the TrainJob then and every status read on the way."""
    seen: list[str] = []
    job = client.wait_for_job_status(
        name, {status}, timeout=HANG_S, polling_interval=1, callbacks=[lambda j: seen.append(j.status)]
    )
    return job, seen


def assert_progress(seen: list[str], allowed: tuple[str, ...]) -> None:
    """The statuses read in order, none going back (Created, then Running, then Complete)."""
    order = [allowed.index(s) if s in allowed else -1 for s in seen]
    assert -1 not in order and order == sorted(order), f"statuses read: {seen}"


def trainer_pods(name: str, mpi: bool) -> list[dict]:
    """The pods whose end ends the TrainJob: every node pod, or MPI's launcher (the JobSet's
    success policy targets it; the node pods run sshd until the JobSet stops them)."""
    job = constants.LAUNCHER if mpi else constants.NODE
    return [p for p in pods(name) if p["metadata"]["labels"][constants.JOBSET_RJOB_NAME_LABEL] == job]


def run_to_complete(
    client, name: str, runtime_name: str, num_nodes: int, device, mpi: bool = False
) -> TrainJob:
    """Read Running once every trainer pod runs, Complete once they have finished: each report whole."""
    running, seen = follow(client, name, RUNNING)
    assert_progress(seen, (CREATED, RUNNING))
    runtime_read = client.get_runtime(runtime_name)
    assert replace(running, steps=steps(running)) == TrainJob(
        name=name,
        runtime=runtime_read,
        steps=expected_steps(name, RUNNING, device, mpi),
        num_nodes=num_nodes,
        creation_timestamp=running.creation_timestamp,
        status=RUNNING,
    )
    tj = get("trainjobs.trainer.kubeflow.org", "-n", NS, name)
    assert (tj.get("status") or {}).get("conditions") is None, "Running is read only without a condition"
    created = tj["metadata"]["creationTimestamp"]
    assert running.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ") == created
    ending = trainer_pods(name, mpi)
    for pod in ending:
        finish_pod(NS, pod["metadata"]["name"])
    done, seen = follow(client, name, COMPLETE)
    if mpi:
        # As upstream's: once the JobSet completes it deletes the sshd pods, and a read between that
        # and the TrainJob's condition counts one node of two: Created.
        assert set(seen) <= {CREATED, RUNNING, COMPLETE}, f"statuses read: {seen}"
    else:
        assert_progress(seen, (RUNNING, COMPLETE))
    succeeded = {p["metadata"]["name"] for p in ending}
    ended = [s for s in steps(done) if s.pod_name in succeeded]
    assert ended == [s for s in expected_steps(name, "Succeeded", device, mpi) if s.pod_name in succeeded]
    assert len(ended) == len(ending)
    if not mpi:
        assert steps(done) == ended, "every node pod finished"
    assert replace(done, steps=[]) == replace(running, steps=[], status=COMPLETE)
    return done


GATE = "ato.test/held"
# Through the SDK's runtimePatches: the node pods wait at a scheduling gate until the test lifts it.
HOLD = RuntimePatch(
    training_runtime_spec=TrainingRuntimeSpecPatch(
        template=JobSetTemplatePatch(
            spec=JobSetSpecPatch(
                replicated_jobs=[
                    ReplicatedJobPatch(
                        name="node",
                        template=JobTemplatePatch(
                            spec=JobSpecPatch(
                                template=PodTemplatePatch(
                                    spec=PodSpecPatch(scheduling_gates=[{"name": GATE}])
                                )
                            )
                        ),
                    )
                ]
            )
        )
    )
)


def held_pods(name: str, count: int) -> list[dict]:
    return wait_for(
        lambda: (lambda ps: ps if len(ps) == count else None)(pods(name)), what=f"{count} held pods of {name}"
    )


def lift_gate(pod: dict) -> None:
    remove = [{"op": "remove", "path": "/spec/schedulingGates"}]
    kubectl("patch", "pod", "-n", NS, pod["metadata"]["name"], "--type=json", "-p", json.dumps(remove))


def test_a_python_function_trains_on_torch_distributed(client, trained):
    """CustomTrainer: the function's source in torchrun's command, on two nodes of two CPUs;
    Created while the pods are held (a runtime patch's scheduling gate), then Running, Complete."""
    trainer = CustomTrainer(
        func=train_fn,
        func_args={"learning_rate": 0.1},
        image=IMAGE,
        num_nodes=2,
        resources_per_node={"cpu": 2},
        env={"EPOCHS": "3"},
    )
    name = client.train(runtime="torch-distributed", trainer=trainer, options=[Name("sdk-torch"), HOLD])
    trained[name] = "torch-distributed"
    sent = get("trainjobs.trainer.kubeflow.org", "-n", NS, name)["spec"]
    command = sent["trainer"]["command"]
    assert command[:2] == ["bash", "-c"] and 'torchrun "test_sdk.py"' in command[2]
    assert "train_fn(**{'learning_rate': 0.1})" in command[2]
    assert sent["runtimePatches"][0]["manager"] == "trainer.kubeflow.org/kubeflow-sdk"
    js = wait_for(lambda: jobset(name), what=f"JobSet {name}")
    node = job_container(js)
    assert (node["image"], node["command"]) == (IMAGE, command)
    assert node["resources"] == {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    assert env(node) == {
        "EPOCHS": "3", "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": RANK,
        "PET_MASTER_ADDR": f"{name}-node-0-0.{name}", "PET_MASTER_PORT": "29500",
    }  # fmt: skip
    held = held_pods(name, 2)
    assert [p["spec"].get("schedulingGates") for p in held] == [[{"name": GATE}]] * 2, "held by the patch"
    # Each step: the pod's CPU limit is its device, PET_NPROC_PER_NODE its device count.
    created = client.get_job(name)
    assert replace(created, steps=steps(created)) == TrainJob(
        name=name,
        runtime=RUNTIMES["torch-distributed"],
        steps=expected_steps(name, "Pending", ("cpu", "2")),
        num_nodes=2,
        creation_timestamp=created.creation_timestamp,
        status=CREATED,
    )
    for pod in held:
        lift_gate(pod)
    done = run_to_complete(client, name, "torch-distributed", 2, ("cpu", "2"))
    assert [s.name for s in steps(done)] == ["node-0", "node-1"]


def test_a_container_trains_on_a_namespaced_runtime(client, trained, local_runtime):
    """CustomTrainerContainer on a TrainingRuntime of the TrainJob's namespace."""
    trainer = CustomTrainerContainer(image=IMAGE, num_nodes=3, env={"SEED": "7"})
    name = client.train(runtime=local_runtime, trainer=trainer)
    trained[name] = local_runtime
    tj = get("trainjobs.trainer.kubeflow.org", "-n", NS, name)
    assert tj["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": local_runtime,
    }
    node = job_container(wait_for(lambda: jobset(name), what=f"JobSet {name}"))
    assert node["image"] == IMAGE and "command" not in node
    assert env(node) == {
        "SEED": "7", "JAX_NUM_PROCESSES": "3", "JAX_PROCESS_ID": RANK,
        "JAX_COORDINATOR_ADDRESS": f"{name}-node-0-0.{name}:29500",
    }  # fmt: skip
    done = run_to_complete(client, name, local_runtime, 3, ("Unknown", "Unknown"))
    assert [s.name for s in steps(done)] == ["node-0", "node-1", "node-2"]


def test_a_python_function_trains_with_mpirun_on_deepspeed(client, trained):
    """MPI: the launcher runs mpirun and the function as node-0, the sshd nodes are node-1 on."""
    name = client.train(
        runtime="deepspeed-distributed",
        trainer=CustomTrainer(func=train_fn, func_args={"learning_rate": 0.2}, num_nodes=2),
    )
    trained[name] = "deepspeed-distributed"
    command = get("trainjobs.trainer.kubeflow.org", "-n", NS, name)["spec"]["trainer"]["command"]
    assert command[:5] == ["mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c"]
    assert 'python "/home/mpiuser/test_sdk.py"' in command[5]
    js = wait_for(lambda: jobset(name), what=f"JobSet {name}")
    assert job_container(js, "launcher")["command"] == command
    assert job_container(js, "node")["command"] == ["/usr/sbin/sshd"], "the sshd nodes keep the runtime's"
    assert env(job_container(js, "launcher"))["OMPI_MCA_orte_set_default_slots"] == "1"
    done = run_to_complete(client, name, "deepspeed-distributed", 2, ("Unknown", "Unknown"), mpi=True)
    assert steps(done)[0].name == "node-0"


def test_the_sdk_lists_its_trainjobs_and_deletes_one_that_runs(client, trained):
    """A TrainJob without a trainer (the runtime's image, one node), listed with the finished ones,
    then deleted while it runs: its JobSet and pods go with it."""
    name = client.train(runtime="xgboost-distributed")
    assert "trainer" not in get("trainjobs.trainer.kubeflow.org", "-n", NS, name)["spec"]
    running, seen = follow(client, name, RUNNING)
    assert_progress(seen, (CREATED, RUNNING))
    assert (running.num_nodes, steps(running)) == (1, expected_steps(name, RUNNING))
    listed = {j.name: j for j in client.list_jobs()}
    assert sorted(listed) == sorted([*trained, name])
    for job_name, runtime_name in trained.items():
        # A finished MPI job's sshd pods may still be going away: its steps are left out.
        keep = steps if runtime_name != "deepspeed-distributed" else lambda _: []
        listed_job, got = listed[job_name], client.get_job(job_name)
        assert replace(listed_job, steps=keep(listed_job)) == replace(got, steps=keep(got))
        assert (listed_job.status, listed_job.runtime.name) == (COMPLETE, runtime_name)
    (only,) = client.list_jobs(runtime=client.get_runtime("xgboost-distributed"))
    assert replace(only, steps=steps(only)) == replace(running, steps=steps(running))
    client.delete_job(name)
    wait_for(lambda: jobset(name) is None, what=f"JobSet {name} deleted with its TrainJob")
    wait_for(lambda: pods(name, terminating=True) == [], what=f"{name}'s pods gone")
    with pytest.raises(RuntimeError, match=f"Failed to get TrainJob: {NS}/{name}"):
        client.get_job(name)
    assert name not in {j.name for j in client.list_jobs()}
