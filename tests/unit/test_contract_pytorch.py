"""PyTorchJob as training-operator v1.9.0 runs it: the env of every pod, the workers' init
container, the status rules and what its webhook refuses.

Expected values come from upstream's tests where they exist (``elastic_test.go``
TestElasticGenerate; ``pytorchjob_controller_test.go`` "Should get the corresponding resources
successfully", for a plain and an elastic job) and otherwise from ``envvar.go``, ``master.go``,
``elastic.go`` and ``initcontainer.go`` at v1.9.0: their order of variables is what is listed.
"""

from __future__ import annotations

import pytest
from test_plan_status import cr, failed, ok, run
from training_jobs import conditions as cond
from training_jobs.contracts import pytorch as pt
from training_jobs.model import InvalidJob
from training_jobs.plan import observe_args, plan
from training_jobs.profiles.pytorch import PyTorchProfile

NOW = "2026-11-23T10:00:00Z"


def var(name, value):
    return {"name": name, "value": value}


def rspec(replicas=1, policy=None, port=None, containers=("pytorch",)):
    container = [{"name": n, "image": "pytorch/pytorch"} for n in containers]
    if port:
        container[0]["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    spec = {"replicas": replicas, "template": {"spec": {"containers": container}}}
    if policy:
        spec["restartPolicy"] = policy
    return spec


def pytorchjob(specs, name="job", **spec):
    return cr("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": specs, **spec}, name=name)


def pods_of(job):
    result = plan(job, {"pods": [], "services": []}, {}, NOW)
    return {o["metadata"]["name"]: o for o in result["create"] if o["kind"] == "Pod"}


def env_of(pod, container="pytorch"):
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return c.get("env")


def master_env(job, world, rank, nproc="auto", nnodes=None, port="23456"):
    out = [
        var("PYTHONUNBUFFERED", "1"),
        var("MASTER_PORT", port),
        var("PET_MASTER_PORT", port),
        var("MASTER_ADDR", f"{job}-master-0"),
        var("PET_MASTER_ADDR", f"{job}-master-0"),
        var("WORLD_SIZE", world),
        var("RANK", rank),
        var("PET_NODE_RANK", rank),
    ]
    if nproc is not None:
        out.append(var("PET_NPROC_PER_NODE", nproc))
    if nnodes is not None:
        out.append(var("PET_NNODES", nnodes))
    return out


@pytest.mark.parametrize(
    ("case", "job", "pod", "expected"),
    [
        # pytorchjob_controller_test.go "Should get the corresponding resources successfully":
        # Master 1 and Worker 2 on port 8080 (one container, "pytorch"): the master pod has
        # MASTER_PORT = the master Service's port, MASTER_ADDR = its name, PET_NPROC_PER_NODE auto.
        (
            "master and two workers, master pod",
            pytorchjob({"Master": rspec(port=8080), "Worker": rspec(2, port=8080)}, name="test"),
            "test-master-0",
            master_env("test", "3", "0", nnodes="3", port="8080"),
        ),
        # A worker's RANK counts after the master's.
        (
            "master and two workers, worker 1",
            pytorchjob({"Master": rspec(port=8080), "Worker": rspec(2, port=8080)}, name="test"),
            "test-worker-1",
            master_env("test", "3", "2", nnodes="3", port="8080"),
        ),
        # WORLD_SIZE is replicas x nprocPerNode when that is a number.
        (
            "nprocPerNode 4",
            pytorchjob({"Master": rspec(), "Worker": rspec(1)}, nprocPerNode="4"),
            "job-worker-0",
            master_env("job", "8", "1", nproc="4", nnodes="2"),
        ),
        # "gpu" counts as 1 in WORLD_SIZE and is passed on as written.
        (
            "nprocPerNode gpu",
            pytorchjob({"Master": rspec(), "Worker": rspec(3)}, nprocPerNode="gpu"),
            "job-worker-2",
            master_env("job", "4", "3", nproc="gpu", nnodes="4"),
        ),
        # Without a Master: no MASTER_* nor RANK (torchrun gets them from the rendezvous).
        (
            "workers only",
            pytorchjob({"Worker": rspec(2)}),
            "job-worker-1",
            [var("PYTHONUNBUFFERED", "1"), var("PET_NPROC_PER_NODE", "auto"), var("PET_NNODES", "2")],
        ),
        # pytorchjob_controller_test.go, elastic "Should get the corresponding resources
        # successfully": min 1, max 3, c10d, maxRestarts 3, the endpoint worker-0:port.
        (
            "elastic, upstream's controller test",
            pytorchjob(
                {"Worker": rspec(1, port=8080)},
                name="elastic",
                elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 3},
            ),
            "elastic-worker-0",
            [
                var("PYTHONUNBUFFERED", "1"),
                var("PET_NPROC_PER_NODE", "auto"),
                var("PET_RDZV_ENDPOINT", "elastic-worker-0:8080"),
                var("PET_RDZV_BACKEND", "c10d"),
                var("PET_NNODES", "1:3"),
                var("PET_MAX_RESTARTS", "3"),
            ],
        ),
        # setElasticPolicy: min and max default to the Worker replicas; the deprecated
        # elasticPolicy.nProcPerNode replaces spec.nprocPerNode's default.
        (
            "elastic defaults, deprecated nProcPerNode",
            pytorchjob({"Worker": rspec(2)}, elasticPolicy={"nProcPerNode": 2, "standalone": True}),
            "job-worker-0",
            [
                var("PYTHONUNBUFFERED", "1"),
                var("PET_RDZV_ENDPOINT", "job-worker-0:23456"),
                var("PET_RDZV_BACKEND", "c10d"),
                var("PET_NNODES", "2:2"),
                var("PET_NPROC_PER_NODE", "2"),
                var("PET_STANDALONE", ""),
            ],
        ),
        # A missing max takes the min.
        (
            "elastic, min only",
            pytorchjob({"Worker": rspec(2)}, elasticPolicy={"minReplicas": 2}),
            "job-worker-1",
            [
                var("PYTHONUNBUFFERED", "1"),
                var("PET_NPROC_PER_NODE", "auto"),
                var("PET_RDZV_ENDPOINT", "job-worker-0:23456"),
                var("PET_RDZV_BACKEND", "c10d"),
                var("PET_NNODES", "2:2"),
            ],
        ),
    ],
)
def test_env_of_a_pod(case, job, pod, expected):
    assert env_of(pods_of(job)[pod]) == expected


def test_elastic_generate_upstream_table():
    """elastic_test.go TestElasticGenerate, "With ElasticPolicy": the same six variables
    (upstream compares them as a set; its generator's order is endpoint, backend, nnodes,
    max restarts, id, conf)."""
    policy = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "rdzvBackend": "c10d",
        "rdzvPort": 1234,
        "rdzvHost": "localhost",
        "rdzvId": "rdzv-id",
        "rdzvConf": [
            {"key": "rdzv-conf-name", "value": "rdzv-conf-value"},
            {"key": "rdzv-conf-name-1", "value": "rdzv-conf-value-1"},
        ],
        "maxRestarts": 3,
    }
    assert pt.elastic_env("job", policy, 1, 23456) == [
        var("PET_RDZV_ENDPOINT", "localhost:1234"),
        var("PET_RDZV_BACKEND", "c10d"),
        var("PET_NNODES", "1:3"),
        var("PET_MAX_RESTARTS", "3"),
        var("PET_RDZV_ID", "rdzv-id"),
        var("PET_RDZV_CONF", "rdzv-conf-name=rdzv-conf-value,rdzv-conf-name-1=rdzv-conf-value-1"),
    ]


def test_every_container_gets_the_env_and_the_user_value_loses():
    job = pytorchjob({"Master": rspec(containers=("pytorch", "sidecar")), "Worker": rspec(1)})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"] = [
        var("RANK", "7"),
        var("MY_VAR", "x"),
    ]
    master = pods_of(job)["job-master-0"]
    assert env_of(master, "sidecar") == master_env("job", "2", "0", nnodes="2")
    assert env_of(master)[0] == var("MY_VAR", "x")
    assert [e for e in env_of(master) if e["name"] == "RANK"] == [var("RANK", "0")]


def test_workers_wait_for_the_master_in_an_init_container():
    """initcontainer.go: only Worker pods of a job with a Master, after the user's own."""
    job = pytorchjob({"Master": rspec(), "Worker": rspec(1)}, name="mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"] = [
        {"name": "fetch", "image": "busybox"}
    ]
    pods = pods_of(job)
    assert "initContainers" not in pods["mnist-master-0"]["spec"]
    fetch, init = pods["mnist-worker-0"]["spec"]["initContainers"]
    assert fetch["name"] == "fetch"
    assert init == {
        "name": "init-pytorch",
        "image": "alpine:3.10",
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
        "command": [
            "sh",
            "-c",
            "err=1;for i in $(seq 100); do if nslookup mnist-master-0; then err=0 && break; fi;"
            "echo waiting for master; sleep 2; done; exit $err",
        ],
    }
    assert "initContainers" not in pods_of(pytorchjob({"Worker": rspec(2)}))["job-worker-0"]["spec"]


def test_init_container_image_and_tries_are_operator_settings():
    job = pytorchjob({"Master": rspec(), "Worker": rspec(1)})
    config = {
        "pytorch_init_container_image": "registry.local/busybox:1.36",
        "pytorch_init_container_max_tries": "5",
    }
    result = plan(job, {"pods": [], "services": []}, config, NOW)
    (worker,) = [
        o for o in result["create"] if o["kind"] == "Pod" and o["metadata"]["name"] == "job-worker-0"
    ]
    (init,) = worker["spec"]["initContainers"]
    assert init["image"] == "registry.local/busybox:1.36"
    assert "$(seq 5)" in init["command"][2]


def test_defaults_restart_policy_port_and_labels():
    pods = pods_of(pytorchjob({"Master": rspec(), "Worker": rspec(1)}))
    master = pods["job-master-0"]
    assert master["spec"]["restartPolicy"] == "OnFailure"
    assert master["spec"]["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert "training.kubeflow.org/job-role" not in pods["job-worker-0"]["metadata"]["labels"]
    alone = pods_of(pytorchjob({"Worker": rspec(2)}))
    assert alone["job-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in alone["job-worker-1"]["metadata"]["labels"]


MASTER_JOB = {"Master": rspec(policy="Never"), "Worker": rspec(2, policy="Never")}
ELASTIC = {"minReplicas": 1, "maxReplicas": 3}


@pytest.mark.parametrize(
    ("case", "specs", "spec", "phases", "state", "message"),
    [
        ("master running", MASTER_JOB, {}, {}, cond.RUNNING, "PyTorchJob job is running."),
        (
            "master succeeded, workers running",
            MASTER_JOB,
            {},
            {"job-master-0": ok()},
            cond.SUCCEEDED,
            "PyTorchJob job is successfully completed.",
        ),
        (
            "a worker failed under Never",
            MASTER_JOB,
            {},
            {"job-worker-1": failed()},
            cond.FAILED,
            "PyTorchJob job is failed because 1 Worker replica(s) failed.",
        ),
        ("workers running", {"Worker": rspec(2)}, {}, {}, cond.RUNNING, "PyTorchJob ns/job is running."),
        (
            "one of two workers succeeded",
            {"Worker": rspec(2)},
            {},
            {"job-worker-0": ok()},
            cond.RUNNING,
            "PyTorchJob ns/job is running.",
        ),
        (
            "all workers succeeded",
            {"Worker": rspec(2)},
            {},
            {"job-worker-0": ok(), "job-worker-1": ok()},
            cond.SUCCEEDED,
            "PyTorchJob ns/job successfully completed.",
        ),
        # Elastic: any worker's success is the job's (torchrun's group finished).
        (
            "elastic, one worker succeeded",
            {"Worker": rspec(2)},
            {"elasticPolicy": ELASTIC},
            {"job-worker-1": ok()},
            cond.SUCCEEDED,
            "PyTorchJob ns/job successfully completed.",
        ),
    ],
)
def test_status(case, specs, spec, phases, state, message):
    result = run(pytorchjob(specs, **spec), phases)
    last = result["status"]["conditions"][-1]
    assert (last["type"], last["message"]) == (state, message)


@pytest.mark.parametrize(
    ("specs", "spec", "error"),
    [
        ({"Master": rspec(2), "Worker": rspec(1)}, {}, "Master.replicas must be 1"),
        ({"Worker": rspec(0)}, {}, "Worker.replicas must be at least 1"),
        ({"Worker": rspec(1, containers=("trainer",))}, {}, "container named 'pytorch'"),
        (
            {"Master": rspec()},
            {"elasticPolicy": ELASTIC},
            "Worker must be configured if elastic policy is used",
        ),
        (
            {"Worker": rspec(1)},
            {"elasticPolicy": {"nProcPerNode": 2}, "nprocPerNode": "2"},
            "must not be used with spec.nprocPerNode",
        ),
    ],
)
def test_webhook_refusals(specs, spec, error):
    profile = PyTorchProfile()
    with pytest.raises(InvalidJob, match=error):
        profile.validate(profile.job(pytorchjob(specs, **spec)))


METRICS = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
]


def test_an_elastic_job_with_metrics_gets_its_autoscaler():
    """hpa.go desiredHPA: named after the job, targeting the PyTorchJob (its scale
    subresource), min and max from the defaulted elastic policy, the metrics as written; only
    such a job reads HorizontalPodAutoscalers at all."""
    job = pytorchjob(
        {"Worker": rspec(2)}, name="elastic", elasticPolicy={"maxReplicas": 4, "metrics": METRICS}
    )
    result = plan(job, {"pods": [], "services": [], "horizontalpodautoscalers": []}, {}, NOW)
    (hpa,) = [o for o in result["create"] if o["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["metadata"]["name"] == "elastic"
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    assert hpa["spec"] == {
        "scaleTargetRef": {"kind": "PyTorchJob", "name": "elastic", "apiVersion": "kubeflow.org/v1"},
        "minReplicas": 4,
        "maxReplicas": 4,
        "metrics": METRICS,
    }
    observed = {"pods": [], "services": [], "horizontalpodautoscalers": [hpa]}
    again = plan(job, observed, {}, NOW)
    assert not [o for o in again["create"] if o["kind"] == "HorizontalPodAutoscaler"]
    kinds = [k["kind"] for k in observe_args(job)["kinds"]]
    assert "HorizontalPodAutoscaler" in kinds


def test_a_suspended_elastic_job_has_no_autoscaler_until_it_resumes():
    """The HPA scales the job's replicas (the scale subresource's spec), suspended or not: it goes
    while the job is suspended (a job waiting for Kueue) and comes back when it resumes."""
    job = pytorchjob(
        {"Worker": rspec(2)}, name="elastic", elasticPolicy={"maxReplicas": 4, "metrics": METRICS}
    )
    (hpa,) = [o for o in plan(job, {}, {}, NOW)["create"] if o["kind"] == "HorizontalPodAutoscaler"]
    hpa = {**hpa, "metadata": {**hpa["metadata"], "uid": "hpa-uid"}}
    observed = {"pods": [], "services": [], "horizontalpodautoscalers": [hpa]}
    job["spec"]["runPolicy"] = {"suspend": True}
    suspended = plan(job, observed, {}, NOW)
    assert [(r["apiVersion"], r["kind"], r["name"]) for r in suspended["delete"]] == [
        ("autoscaling/v2", "HorizontalPodAutoscaler", "elastic")
    ]
    assert not [o for o in suspended["create"] if o["kind"] == "HorizontalPodAutoscaler"]
    assert not [r for r in plan(job, {}, {}, NOW)["create"] if r["kind"] == "HorizontalPodAutoscaler"]
    job["spec"]["runPolicy"] = {"suspend": False}
    resumed = plan(job, {"pods": [], "services": [], "horizontalpodautoscalers": []}, {}, NOW)
    assert [o for o in resumed["create"] if o["kind"] == "HorizontalPodAutoscaler"]


def test_no_autoscaler_without_metrics():
    job = pytorchjob({"Worker": rspec(2)}, elasticPolicy={"maxReplicas": 4})
    result = plan(job, {"pods": [], "services": []}, {}, NOW)
    assert not [o for o in result["create"] if o["kind"] == "HorizontalPodAutoscaler"]
    assert "HorizontalPodAutoscaler" not in [k["kind"] for k in observe_args(job)["kinds"]]
