"""A v1 job moved to a TrainJob with ``hack/convert-to-trainjob.py``, on the real cluster: the
same manifest created both ways (this operator serves both), the TrainJob's pods get their
framework's env from the built-in runtime, the world size the v1 job's pods get, and the user's
env and pod settings; their pods finished, the TrainJob is Complete.

Run by ``hack/test.sh`` (``trainer_tests``: JobSet and the operator started, ``pytest -m trainer``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from kube import ROOT, finish_pod, get, job_pods, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.trainer

NS = "ato-convert"
namespace = namespace_fixture(NS)
IMAGE = "docker.io/library/busybox:1.36"
COMMAND = ROOT / "hack" / "convert-to-trainjob.py"
USER_ENV = {"name": "EPOCHS", "value": "3"}


def replica(count: int, container: str, **pod) -> dict:
    main = {"name": container, "image": IMAGE, "command": ["sleep", "3600"], "env": [USER_ENV]}
    spec = {"containers": [main], **pod}
    return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": spec}}


def v1_job(kind: str, name: str, spec: dict) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def convert(job: dict) -> tuple[str, str]:
    """The command's TrainJob (YAML) and notes, for one manifest on its stdin."""
    done = subprocess.run(
        [sys.executable, str(COMMAND)], input=json.dumps(job), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def create_both(job: dict) -> dict:
    """The v1 job and its TrainJob (the same name: different kinds); the TrainJob as converted."""
    trainjob_yaml, notes = convert(job)
    assert notes, "the command says what changed"
    kubectl("create", "-f", "-", stdin=json.dumps(job))
    kubectl("create", "-f", "-", stdin=trainjob_yaml)
    return yaml.safe_load(trainjob_yaml)


def trainjob(name: str) -> dict:
    return get("trainjobs.trainer.kubeflow.org", "-n", NS, name)


def v2_pods(name: str, job: str) -> list[dict]:
    """The running pods of the TrainJob's replicated job ``job``, as many as its JobSet runs."""

    def jobset():
        found = kubectl("get", "jobsets.jobset.x-k8s.io", "-n", NS, name, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    spec = wait_for(jobset, what=f"JobSet {name}")["spec"]
    (rjob,) = [r for r in spec["replicatedJobs"] if r["name"] == job]
    count = rjob["template"]["spec"]["parallelism"]

    def found():
        selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={job}"
        pods = get("pods", "-n", NS, "-l", selector)["items"]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return running if len(running) == count else None

    return wait_for(found, what=f"{count} running pod(s) of TrainJob {name}'s {job}")


def v1_pods(name: str, count: int) -> list[dict]:
    def found():
        running = [p for p in job_pods(NS, name) if p["status"].get("phase") == "Running"]
        return running if len(running) == count else None

    return wait_for(found, what=f"{count} running pod(s) of the v1 job {name}")


def env_of(pod: dict, container: str) -> dict:
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in main.get("env") or []}


def complete(name: str, job: str = "node") -> None:
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={job}"
    for pod in get("pods", "-n", NS, "-l", selector)["items"]:
        finish_pod(NS, pod["metadata"]["name"])

    def done():
        conditions = (trainjob(name).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_for(done, what=f"TrainJob {name} Complete")


VOLUME = {"name": "data", "emptyDir": {}}
MOUNT = {"name": "data", "mountPath": "/data"}


def test_a_pytorchjob_moves_with_its_world_size_env_and_pod_settings():
    pod = {"volumes": [VOLUME]}
    master, worker = replica(1, "pytorch", **pod), replica(1, "pytorch", **pod)
    for rs in (master, worker):
        rs["template"]["metadata"] = {"labels": {"team": "vision"}}
        rs["template"]["spec"]["containers"][0]["volumeMounts"] = [MOUNT]
    job = v1_job(
        "PyTorchJob",
        "torch",
        {"nprocPerNode": "2", "pytorchReplicaSpecs": {"Master": master, "Worker": worker}},
    )
    create_both(job)
    v1 = v1_pods("torch", 2)
    v2 = v2_pods("torch", "node")
    assert len(v2) == len(v1), "a node per v1 pod"
    for pod in v2:
        env = env_of(pod, "node")
        assert env["EPOCHS"] == "3" and env["PET_MASTER_ADDR"] == "torch-node-0-0.torch"
        assert pod["metadata"]["labels"]["team"] == "vision"
        assert VOLUME["name"] in [v["name"] for v in pod["spec"]["volumes"]]
        assert MOUNT in pod["spec"]["containers"][0]["volumeMounts"]
        for old in v1:
            old_env = env_of(old, "pytorch")
            assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == (
                old_env["PET_NNODES"],
                old_env["PET_NPROC_PER_NODE"],
            )
            assert int(env["PET_NNODES"]) * int(env["PET_NPROC_PER_NODE"]) == int(old_env["WORLD_SIZE"]) == 4
    complete("torch")


# (kind, replica specs, the v2 variable, the v1 variable: the same world size)
WORLD = {
    "xgboost": ("XGBoostJob", "xgbReplicaSpecs", {"Master": 1, "Worker": 2}, "DMLC_NUM_WORKER", "WORLD_SIZE", "3"),
    "jax": ("JAXJob", "jaxReplicaSpecs", {"Worker": 2}, "JAX_NUM_PROCESSES", "NUM_PROCESSES", "2"),
}  # fmt: skip


@pytest.mark.parametrize("framework", sorted(WORLD))
def test_a_job_moves_with_its_world_size(framework):
    kind, field, counts, v2_var, v1_var, size = WORLD[framework]
    specs = {rtype: replica(n, framework) for rtype, n in counts.items()}
    create_both(v1_job(kind, framework, {field: specs}))
    v1 = v1_pods(framework, int(size))
    v2 = v2_pods(framework, "node")
    assert len(v2) == len(v1), "a node per v1 pod"
    assert {env_of(p, "node")[v2_var] for p in v2} == {env_of(p, framework)[v1_var] for p in v1} == {size}
    assert {env_of(p, "node")["EPOCHS"] for p in v2} == {"3"}
    complete(framework)


def slots(hostfile: str) -> list[str]:
    """The slots of each host of an MPI hostfile (``<host> slots=N``), in its order."""
    return [line.split()[1] for line in hostfile.splitlines() if line.strip()]


def test_an_mpijob_moves_with_its_hosts_and_slots():
    specs = {"Launcher": replica(1, "mpi"), "Worker": replica(3, "mpi")}
    tj = create_both(v1_job("MPIJob", "mpi", {"slotsPerWorker": 2, "mpiReplicaSpecs": specs}))
    assert tj["spec"]["runtimeRef"]["name"] == "deepspeed-distributed"
    workers = v2_pods("mpi", "node")
    (launcher,) = v2_pods("mpi", "launcher")  # after the node is Ready: the launcher is a host too
    env = env_of(launcher, "node")
    assert env["EPOCHS"] == "3" and env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert launcher["spec"]["containers"][0]["command"] == ["sleep", "3600"]
    v2_hostfile = get("configmap", "-n", NS, "mpi-mpi-hostfile")["data"]["hostfile"]
    v1_pods("mpi", 4)
    v1_hostfile = get("configmap", "-n", NS, "mpi-config")["data"]["hostfile"]
    assert slots(v2_hostfile) == slots(v1_hostfile) == ["slots=2"] * 3, (v2_hostfile, v1_hostfile)
    assert len(workers) == 2, "numNodes 3: two worker pods and the launcher"
    (v1_launcher,) = [p for p in job_pods(NS, "mpi") if p["metadata"]["name"] == "mpi-launcher"]
    assert (
        env["OMPI_MCA_orte_default_hostfile"] == env_of(v1_launcher, "mpi")["OMPI_MCA_orte_default_hostfile"]
    )
    complete("mpi", "launcher")


def test_a_tfjob_is_refused_with_what_to_do():
    job = v1_job("TFJob", "tf", {"tfReplicaSpecs": {"Worker": replica(1, "tensorflow")}})
    done = subprocess.run(
        [sys.executable, str(COMMAND)], input=json.dumps(job), capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "Either keep the TFJob: this operator serves it as before" in done.stderr
