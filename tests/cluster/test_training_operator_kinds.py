"""training-operator v1.9's PyTorchJob, XGBoostJob, JAXJob, MPIJob and PaddleJob against the running
operator: pods, Services, env, init containers and MPIJob's launcher objects as upstream creates them, success and failure driven through
real pod phases (KWOK annotations), scaling through the scale subresource, and what admission
refuses."""

from __future__ import annotations

import json

import kube
import pytest
from kube import create_job, finish_pod, get, kubectl, namespace_fixture, replica, wait_for

pytestmark = pytest.mark.cluster

NS = "ato-kinds"
namespace = namespace_fixture(NS)
CPU_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def replicas(container, count=1, exit_code=None, run_for="2s", policy=None):
    return replica(exit_code, run_for, policy, container=container, count=count)


def manifest(kind, name, spec):
    return kube.manifest(kind, name, NS, spec)


def create(kind, name, spec):
    return create_job(kind, name, NS, spec)


def conditions(kind, name):
    # With the group: "paddlejob" alone may mean paddle-operator's.
    return get(f"{kind.lower()}s.kubeflow.org", "-n", NS, name).get("status", {}).get("conditions") or []


def finished(kind, name, state):
    """Wait for the job's last condition to be ``state``; that condition."""

    def done():
        conds = conditions(kind, name)
        return conds[-1] if conds and conds[-1]["type"] == state else None

    return wait_for(done, what=f"{kind} {name} {state}")


def pod(name):
    return get("pod", "-n", NS, name)


def pods_exist(names):
    def present():
        listed = {p["metadata"]["name"] for p in get("pods", "-n", NS)["items"]}
        return set(names) <= listed

    wait_for(present, what=f"pods {sorted(names)}")


def env(pod_name, container):
    (c,) = [c for c in pod(pod_name)["spec"]["containers"] if c["name"] == container]
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


def test_pytorchjob_master_and_workers():
    name = create(
        "PyTorchJob",
        "pt-dist",
        {
            "nprocPerNode": "2",
            "pytorchReplicaSpecs": {
                # The master runs until the test has seen every pod: it ends it below.
                "Master": replicas("pytorch"),
                "Worker": replicas("pytorch", 2),
            },
        },
    )
    pods_exist([f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"])
    worker = env(f"{name}-worker-1", "pytorch")
    assert {
        k: worker[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NPROC_PER_NODE")
    } == {
        "MASTER_ADDR": f"{name}-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "6",
        "RANK": "2",
        "PET_NPROC_PER_NODE": "2",
    }
    (init,) = pod(f"{name}-worker-0")["spec"]["initContainers"]
    assert init["name"] == "init-pytorch" and f"nslookup {name}-master-0" in init["command"][2]
    assert "initContainers" not in pod(f"{name}-master-0")["spec"]
    assert pod(f"{name}-worker-0")["spec"]["restartPolicy"] == "OnFailure"
    services = {s["metadata"]["name"] for s in get("services", "-n", NS)["items"]}
    assert {f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"} <= services
    finish_pod(NS, f"{name}-master-0")
    done = finished("PyTorchJob", name, "Succeeded")
    assert (done["reason"], done["message"]) == (
        "PyTorchJobSucceeded",
        f"PyTorchJob {name} is successfully completed.",
    )


def test_pytorchjob_scales_its_workers_through_the_scale_subresource():
    name = create("PyTorchJob", "pt-scale", {"pytorchReplicaSpecs": {"Worker": replicas("pytorch", 1)}})
    pods_exist([f"{name}-worker-0"])
    wait_for(
        lambda: get("pytorchjob", "-n", NS, name).get("status", {}).get("replicaStatuses", {}).get("Worker"),
        what="the Worker's replica status",
    )
    kubectl("scale", "pytorchjob", "-n", NS, name, "--replicas=3")
    pods_exist([f"{name}-worker-1", f"{name}-worker-2"])
    assert env(f"{name}-worker-2", "pytorch")["PET_NNODES"] == "3"
    kubectl("delete", "pytorchjob", "-n", NS, name, "--wait=false")


def test_pytorchjob_elastic_succeeds_with_one_worker():
    name = create(
        "PyTorchJob",
        "pt-elastic",
        {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 5, "metrics": [CPU_METRIC]},
            "pytorchReplicaSpecs": {"Worker": replicas("pytorch", 2, policy="Never")},
        },
    )
    pods_exist([f"{name}-worker-0", f"{name}-worker-1"])
    worker = env(f"{name}-worker-1", "pytorch")
    assert {
        k: worker[k] for k in ("PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_NNODES", "PET_MAX_RESTARTS")
    } == {
        "PET_RDZV_ENDPOINT": f"{name}-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "5",
    }
    kubectl(
        "annotate",
        "pod",
        "-n",
        NS,
        f"{name}-worker-1",
        "sim.training.ato.dev/exit-code=0",
        "sim.training.ato.dev/run-for=1s",
    )
    hpa = wait_for(
        lambda: kubectl("get", "hpa", "-n", NS, name, "-o", "json", check=False).stdout,
        what="the job's HorizontalPodAutoscaler",
    )
    assert json.loads(hpa)["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name},
        "minReplicas": 1,
        "maxReplicas": 3,
        "metrics": [CPU_METRIC],
    }
    done = finished("PyTorchJob", name, "Succeeded")
    assert done["message"] == f"PyTorchJob {NS}/{name} successfully completed."


def test_xgboostjob_fails_when_a_worker_fails_under_never():
    name = create(
        "XGBoostJob",
        "xgb",
        {
            "xgbReplicaSpecs": {
                "Master": replicas("xgboost"),
                "Worker": replicas("xgboost", 2, exit_code=1, policy="Never"),
            }
        },
    )
    pods_exist([f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"])
    worker = env(f"{name}-worker-0", "xgboost")
    assert worker["MASTER_ADDR"] == f"{name}-master-0"
    assert worker["RANK"] == "1" and worker["WORLD_SIZE"] == "3"
    assert worker["WORKER_ADDRS"] == f"{name}-worker-0,{name}-worker-1"
    labels = pod(f"{name}-master-0")["metadata"]["labels"]
    assert labels["training.kubeflow.org/operator-name"] == "xgboostjob-controller"
    assert labels["training.kubeflow.org/job-role"] == "master"
    done = finished("XGBoostJob", name, "Failed")
    assert done["reason"] == "XGBoostJobFailed"
    assert done["message"].startswith(f"XGBoostJob {name} is failed because ")


def test_jaxjob_succeeds_when_every_worker_does():
    name = create("JAXJob", "jax", {"jaxReplicaSpecs": {"Worker": replicas("jax", 2, exit_code=0)}})
    pods_exist([f"{name}-worker-0", f"{name}-worker-1"])
    assert env(f"{name}-worker-1", "jax") == {
        "PYTHONUNBUFFERED": "1",
        "COORDINATOR_PORT": "6666",
        "COORDINATOR_ADDRESS": f"{name}-worker-0",
        "NUM_PROCESSES": "2",
        "PROCESS_ID": "1",
    }
    done = finished("JAXJob", name, "Succeeded")
    assert done["message"] == f"JAXJob {NS}/{name} successfully completed."


def test_mpijob_launcher_decides_and_its_objects_follow_the_workers():
    name = create(
        "MPIJob",
        "mpi",
        {
            "slotsPerWorker": 2,
            "mpiReplicaSpecs": {
                # The launcher runs until the test has seen the workers run: it ends it below.
                "Launcher": replicas("mpi"),
                "Worker": replicas("mpi", 2),
            },
        },
    )
    launcher, workers = f"{name}-launcher", [f"{name}-worker-0", f"{name}-worker-1"]
    pods_exist([launcher, *workers])
    config = get("configmap", "-n", NS, f"{name}-config")
    assert config["data"]["hostfile"] == f"{name}-worker-0 slots=2\n{name}-worker-1 slots=2\n"
    assert config["data"]["kubexec.sh"].endswith('/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"')
    # discover_hosts.sh lists the workers once they run.
    wait_for(
        lambda: (
            get("configmap", "-n", NS, f"{name}-config")["data"]["discover_hosts.sh"]
            == f"#!/bin/sh\necho {name}-worker-0:2\necho {name}-worker-1:2"
        ),
        what="discover_hosts.sh lists the running workers",
    )
    role = get("role", "-n", NS, launcher)
    assert role["rules"][1] == {
        "verbs": ["create"],
        "apiGroups": [""],
        "resources": ["pods/exec"],
        "resourceNames": workers,
    }
    binding = get("rolebinding", "-n", NS, launcher)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": launcher, "namespace": NS}]
    assert get("serviceaccount", "-n", NS, launcher)["metadata"]["labels"]["app"] == name
    spec = pod(launcher)["spec"]
    assert spec["serviceAccountName"] == launcher
    assert [c["name"] for c in spec["initContainers"]] == ["kubectl-delivery"]
    assert env(launcher, "mpi")["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert pod(launcher)["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert pod(workers[0])["spec"]["containers"][0]["command"] == ["sleep"]
    assert not [s for s in get("services", "-n", NS)["items"] if s["metadata"]["name"].startswith(name)]
    finish_pod(NS, launcher)
    done = finished("MPIJob", name, "Succeeded")
    assert (done["reason"], done["message"]) == (
        "MPIJobSucceeded",
        f"MPIJob {name} is successfully completed.",
    )
    # cleanPodPolicy None, upstream's default for MPIJob: the idle workers stay.
    assert {pod(w)["status"]["phase"] for w in workers} == {"Running"}


def test_mpijob_without_replicas_has_one_launcher_and_no_workers():
    """Upstream's defaults (Launcher 1, Worker 0) are the operator's: the schema has none, and
    the name-length rule reads absent replicas as none."""
    launcher = replicas("mpi", exit_code=0)
    worker = replicas("mpi")
    del launcher["replicas"], worker["replicas"]
    name = create("MPIJob", "mpi-defaults", {"mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}})
    finished("MPIJob", name, "Succeeded")
    mine = [
        p["metadata"]["name"]
        for p in get("pods", "-n", NS)["items"]
        if p["metadata"]["name"].startswith(name)
    ]
    assert mine == [f"{name}-launcher"]
    assert get("configmap", "-n", NS, f"{name}-config")["data"]["hostfile"] == ""


# kind -> (replica spec field, container, replica types around a Worker)
LIFECYCLE = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch", ["Master"]),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboost", ["Master"]),
    "JAXJob": ("jaxReplicaSpecs", "jax", []),
    "PaddleJob": ("paddleReplicaSpecs", "paddle", ["Master"]),
    "MPIJob": ("mpiReplicaSpecs", "mpi", ["Launcher"]),
}


def lifecycle_job(kind, name, worker, run_policy=None):
    field, container, others = LIFECYCLE[kind]
    spec = {field: {**{t: replicas(container) for t in others}, "Worker": worker}}
    if run_policy:
        spec["runPolicy"] = run_policy
    return create(kind, name, spec)


@pytest.mark.parametrize("kind", list(LIFECYCLE))
def test_a_worker_that_fails_under_never_fails_the_job(kind):
    container = LIFECYCLE[kind][1]
    name = lifecycle_job(kind, f"never-{kind.lower()}", replicas(container, 1, exit_code=1, policy="Never"))
    done = finished(kind, name, "Failed")
    assert done["reason"] == f"{kind}Failed"
    assert done["message"] == f"{kind} {name} is failed because 1 Worker replica(s) failed."


@pytest.mark.parametrize("kind", list(LIFECYCLE))
def test_a_retryable_exit_restarts_the_worker_until_the_backoff_limit(kind):
    """ExitCode and a retryable code (130): the pod is deleted and created again (Restarting), each
    time counted, until runPolicy.backoffLimit fails the job."""
    container = LIFECYCLE[kind][1]
    name = lifecycle_job(
        kind,
        f"retry-{kind.lower()}",
        replicas(container, 1, exit_code=130, policy="ExitCode"),
        {"backoffLimit": 2},
    )
    wait_for(
        lambda: any(c["type"] == "Restarting" for c in conditions(kind, name)),
        what=f"{kind} {name} Restarting",
    )
    done = finished(kind, name, "Failed")
    assert done["message"] == f"Job {name} has failed because it has reached the specified backoff limit"


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        (
            "MPIJob",
            {"mpiReplicaSpecs": {"Worker": replicas("mpi")}},
            "spec.mpiReplicaSpecs must have a Launcher",
        ),
        (
            "MPIJob",
            {"mpiReplicaSpecs": {"Launcher": replicas("mpi", 2)}},
            "spec.mpiReplicaSpecs.Launcher.replicas must be 1",
        ),
        (
            "PyTorchJob",
            {"pytorchReplicaSpecs": {"Master": replicas("pytorch", 2)}},
            "spec.pytorchReplicaSpecs.Master.replicas must be 1",
        ),
        (
            "PyTorchJob",
            {"elasticPolicy": {"minReplicas": 1}, "pytorchReplicaSpecs": {"Master": replicas("pytorch")}},
            "Worker must be configured if elastic policy is used",
        ),
        (
            "PyTorchJob",
            {"pytorchReplicaSpecs": {"Worker": replicas("trainer")}},
            "must have a container named 'pytorch'",
        ),
        (
            "XGBoostJob",
            {"xgbReplicaSpecs": {"Worker": replicas("xgboost")}},
            "Master must have exactly 1 replica",
        ),
        ("JAXJob", {"jaxReplicaSpecs": {"worker": replicas("jax")}}, "unknown replica type 'worker'"),
    ],
)
def test_admission_refuses_what_upstreams_webhook_refuses(kind, spec, message):
    result = kubectl(
        "apply", "-f", "-", stdin=json.dumps(manifest(kind, f"bad-{kind.lower()}", spec)), check=False
    )
    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr


def test_kubeflow_paddlejob_runs_beside_paddle_operators():
    """training-operator's PaddleJob and paddle-operator's, one of each in one namespace: each is
    reconciled by its own profile and both succeed."""
    name = create(
        "PaddleJob",
        "pd-kf",
        {"paddleReplicaSpecs": {"Worker": replicas("paddle", 2, policy="Never")}},
    )
    other = {
        "apiVersion": "batch.paddlepaddle.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "pd-op", "namespace": NS},
        "spec": {"worker": replicas("paddle", 1, policy="Never")},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(other))
    pods_exist([f"{name}-worker-0", f"{name}-worker-1", "pd-op-worker-0"])
    assert env(f"{name}-worker-1", "paddle") == {
        "PYTHONUNBUFFERED": "1",
        "PADDLE_JOB_ID": name,
        "PADDLE_NNODES": "2",
        "PADDLE_MASTER": f"{name}-worker-0:36543",
    }
    assert env(f"{name}-worker-0", "paddle")["PADDLE_MASTER"] == "$(POD_IP_DUMMY):36543"
    assert "PADDLE_TRAINER_ENDPOINTS" not in env(f"{name}-worker-0", "paddle")
    # paddle-operator's cleans its pods as it succeeds: they run until the checks above are done.
    for worker in (f"{name}-worker-0", f"{name}-worker-1", "pd-op-worker-0"):
        finish_pod(NS, worker)
    for resource, job in (("paddlejobs.kubeflow.org", name), ("paddlejobs.batch.paddlepaddle.org", "pd-op")):
        wait_for(
            lambda resource=resource, job=job: (
                (get(resource, "-n", NS, job).get("status", {}).get("conditions") or [{}])[-1].get("type")
                == "Succeeded"
            ),
            what=f"{resource} {job} Succeeded",
        )
