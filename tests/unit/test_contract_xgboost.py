"""XGBoostJob's env, roles, status rules and refusals as training-operator v1.9 has them.

Upstream has no unit test of ``SetPodEnv`` (``pkg/controller.v1/xgboost/xgboost.go``), so the
env rows are derived from its code: order MASTER_PORT, MASTER_ADDR, WORLD_SIZE, RANK,
PYTHONUNBUFFERED, then WORKER_PORT and WORKER_ADDRS when the job has more than one replica.
Job shapes are upstream's: ``xgboostjob_controller_test.go`` ("When creating the XGBoostJob":
``test-job``, one master and two workers on 9999) and ``examples/xgboost`` (port 9991). Status
messages are ``UpdateJobStatus``'s; the refusals are the cases of ``xgboostjob_webhook_test.go``
(``TestValidateXGBoostJob``).
"""

from __future__ import annotations

import pytest
from training_jobs import conditions as cond
from training_jobs.contracts import xgboost as xgb
from training_jobs.model import InvalidJob
from training_jobs.pods import desired_pod
from training_jobs.profiles.base import Context, Counts
from training_jobs.profiles.xgboost import XGBoostProfile

PROFILE = XGBoostProfile()
CTX = Context(config={}, pods={})


def container(port=None, name="xgboost", image="test-image"):
    c = {"name": name, "image": image}
    if port is not None:
        c["ports"] = [{"name": "xgboostjob-port", "containerPort": port, "protocol": "TCP"}]
    return c


def replica(replicas, *containers, restart_policy=None):
    spec = {"template": {"spec": {"containers": list(containers) or [container(9999)]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def cr(name, specs, namespace="xgboost-test"):
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": {"xgbReplicaSpecs": specs},
    }


def env(master_port, master_addr, world_size, rank, worker_port=None, worker_addrs=None):
    out = [
        {"name": "MASTER_PORT", "value": master_port},
        {"name": "MASTER_ADDR", "value": master_addr},
        {"name": "WORLD_SIZE", "value": world_size},
        {"name": "RANK", "value": rank},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if worker_port is not None:
        out += [
            {"name": "WORKER_PORT", "value": worker_port},
            {"name": "WORKER_ADDRS", "value": worker_addrs},
        ]
    return out


# xgboostjob_controller_test.go "When creating the XGBoostJob": Master 1, Worker 2, port 9999.
CONTROLLER_TEST = cr("test-job", {"Master": replica(1), "Worker": replica(2)})
# examples/xgboost/xgboostjob.yaml: Master 1, Worker 2 (restartPolicy ExitCode), port 9991.
IRIS_TRAIN = cr(
    "xgboost-dist-iris-test-train",
    {"Master": replica(1, container(9991)), "Worker": replica(2, container(9991), restart_policy="ExitCode")},
)
IRIS_ADDRS = "xgboost-dist-iris-test-train-worker-0,xgboost-dist-iris-test-train-worker-1"


@pytest.mark.parametrize(
    ("case", "job", "rtype", "index", "expected"),
    [
        (
            "controller test, master-0",
            CONTROLLER_TEST,
            "Master",
            0,
            env("9999", "test-job-master-0", "3", "0", "9999", "test-job-worker-0,test-job-worker-1"),
        ),
        # Workers rank after the master: worker i is RANK i + 1.
        (
            "controller test, worker-0",
            CONTROLLER_TEST,
            "Worker",
            0,
            env("9999", "test-job-master-0", "3", "1", "9999", "test-job-worker-0,test-job-worker-1"),
        ),
        (
            "controller test, worker-1",
            CONTROLLER_TEST,
            "Worker",
            1,
            env("9999", "test-job-master-0", "3", "2", "9999", "test-job-worker-0,test-job-worker-1"),
        ),
        (
            "xgboostjob.yaml, master-0",
            IRIS_TRAIN,
            "Master",
            0,
            env("9991", "xgboost-dist-iris-test-train-master-0", "3", "0", "9991", IRIS_ADDRS),
        ),
        (
            "xgboostjob.yaml, worker-1",
            IRIS_TRAIN,
            "Worker",
            1,
            env("9991", "xgboost-dist-iris-test-train-master-0", "3", "2", "9991", IRIS_ADDRS),
        ),
        # xgboostjob_v1_iris_train_local.yaml: a lone master has no WORKER_PORT/WORKER_ADDRS.
        (
            "master only",
            cr("xgboost-dist-iris-test-train-local", {"Master": replica(1, container(9991))}),
            "Master",
            0,
            env("9991", "xgboost-dist-iris-test-train-local-master-0", "1", "0"),
        ),
        # Workers scaled to 0 leave one replica in total: no worker variables either.
        (
            "workers scaled to zero",
            cr("solo", {"Master": replica(1), "Worker": replica(0)}),
            "Master",
            0,
            env("9999", "solo-master-0", "1", "0"),
        ),
        # MASTER_PORT is the master's port, WORKER_PORT the workers': they may differ. Ports the
        # template leaves out are the defaulter's 9999 (xgboost_defaults.go).
        (
            "own ports, worker port defaulted",
            cr("ports", {"Master": replica(1, container(9991)), "Worker": replica(1, container())}),
            "Worker",
            0,
            env("9991", "ports-master-0", "2", "1", "9999", "ports-worker-0"),
        ),
        # Lower-case keys are the defaulter's camel-casing (setXGBoostJobTypeNamesToCamelCase).
        (
            "lower-case replica types",
            cr("lc", {"master": replica(1), "worker": replica(3)}),
            "Worker",
            2,
            env("9999", "lc-master-0", "4", "3", "9999", "lc-worker-0,lc-worker-1,lc-worker-2"),
        ),
    ],
)
def test_env_for_every_pod(case, job, rtype, index, expected):
    j = PROFILE.job(job)
    PROFILE.validate(j)
    assert PROFILE.env(j, j.group(rtype), index, CTX) == expected


def test_env_goes_on_every_container():
    # SetPodEnv loops over all of podTemplate.Spec.Containers, sidecars included; init
    # containers get nothing. A variable of the same name in the template is replaced.
    sidecar = {"name": "sidecar", "image": "busybox", "env": [{"name": "RANK", "value": "7"}]}
    job = PROFILE.job(cr("two", {"Master": replica(1, container(9999), sidecar)}))
    job.group("Master").template["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    pod = desired_pod(PROFILE, job, job.group("Master"), 0, CTX)
    expected = env("9999", "two-master-0", "1", "0")
    assert [c["env"] for c in pod["spec"]["containers"]] == [expected, expected]
    assert "env" not in pod["spec"]["initContainers"][0]


def test_pod_env_contract_directly():
    assert xgb.pod_env(
        "a/b", "worker", 0, master_replicas=1, worker_replicas=1, master_port=1, worker_port=2
    ) == env("1", "a-b-master-0", "2", "1", "2", "a-b-worker-0")


def test_pod_env_needs_a_worker_port_when_distributed():
    with pytest.raises(ValueError, match="needs a Worker spec"):
        xgb.pod_env("j", "master", 0, master_replicas=2, worker_replicas=0, master_port=1, worker_port=None)


@pytest.mark.parametrize(
    ("tmpl", "expected"),
    [
        ({"spec": {"containers": [{"name": "xgboost"}]}}, 9999),
        ({"spec": {"containers": [container(9991)]}}, 9991),
        ({"spec": {"containers": [container(1234, name="proxy"), container()]}}, 9999),
    ],
)
def test_port_of(tmpl, expected):
    assert xgb.port_of(tmpl) == expected


def test_defaults_port_and_restart_policy():
    # xgboost_defaults.go: replicas 1, restartPolicy Never, xgboostjob-port 9999 on the container.
    job = PROFILE.job(cr("d", {"Master": replica(None, container())}))
    master = job.group("Master")
    assert (master.replicas, master.restart_policy) == (1, "Never")
    assert master.containers[0]["ports"] == [{"name": "xgboostjob-port", "containerPort": 9999}]


@pytest.mark.parametrize(
    ("rtype", "index", "expected"),
    [("Master", 0, True), ("Worker", 0, False), ("Worker", 1, False)],
)
def test_is_master_role(rtype, index, expected):
    # IsMasterRole: rtype == Master; its pod gets training.kubeflow.org/job-role=master.
    job = PROFILE.job(CONTROLLER_TEST)
    group = job.group(rtype)
    assert PROFILE.is_master_role(job, group, index) is expected
    labels = PROFILE.pod_labels(job, group, index)
    assert (labels.get("training.kubeflow.org/job-role") == "master") is expected


def counts(master=None, worker=None):
    return {"Master": master or Counts(replicas=1), "Worker": worker or Counts(replicas=2)}


@pytest.mark.parametrize(
    ("case", "observed", "state", "message"),
    [
        # UpdateJobStatus: the master's success ends the job, whatever the workers do.
        (
            "master succeeded",
            counts(Counts(replicas=1, succeeded=1), Counts(replicas=2, active=2)),
            cond.SUCCEEDED,
            "XGBoostJob test-job is successfully completed.",
        ),
        (
            "master succeeded while a worker failed",
            counts(Counts(replicas=1, succeeded=1), Counts(replicas=2, failed=1, active=1)),
            cond.SUCCEEDED,
            "XGBoostJob test-job is successfully completed.",
        ),
        # Workers succeeding do not finish the job.
        (
            "workers done, master running",
            counts(Counts(replicas=1, active=1), Counts(replicas=2, succeeded=2)),
            cond.RUNNING,
            "XGBoostJob test-job is running.",
        ),
        (
            "worker failed",
            counts(Counts(replicas=1, active=1), Counts(replicas=2, failed=2)),
            cond.FAILED,
            "XGBoostJob test-job is failed because 2 Worker replica(s) failed.",
        ),
        (
            "master failed",
            counts(Counts(replicas=1, failed=1), Counts(replicas=2, active=2)),
            cond.FAILED,
            "XGBoostJob test-job is failed because 1 Master replica(s) failed.",
        ),
        # A failed pod being recreated (ExitCode, eviction) is a restart, not a failure.
        (
            "worker restarting",
            counts(Counts(replicas=1, active=1), Counts(replicas=2, failed=1, restarting=1, active=1)),
            cond.RUNNING,
            "XGBoostJob test-job is running.",
        ),
        (
            "one of two failed workers restarting",
            counts(Counts(replicas=1, active=1), Counts(replicas=2, failed=2, restarting=1)),
            cond.FAILED,
            "XGBoostJob test-job is failed because 1 Worker replica(s) failed.",
        ),
        # xgboostjob_controller_test.go: the master Running makes the job Running.
        (
            "master running",
            counts(Counts(replicas=1, active=1), Counts(replicas=2, active=1)),
            cond.RUNNING,
            "XGBoostJob test-job is running.",
        ),
        # Only the master's pods count for Running.
        ("only workers running", counts(Counts(replicas=1, pending=1), Counts(replicas=2, active=2)), "", ""),
        ("nothing started", counts(), "", ""),
    ],
)
def test_outcome(case, observed, state, message):
    job = PROFILE.job(CONTROLLER_TEST)
    got = PROFILE.outcome(job, observed, CTX)
    assert (got.state, got.message) == (state, message)


@pytest.mark.parametrize(
    ("case", "specs", "message"),
    [
        # xgboostjob_webhook_test.go "empty containers".
        (
            "empty containers",
            {"Master": {"replicas": 1, "template": {"spec": {"containers": []}}}},
            "Master template has no containers",
        ),
        # "image is empty".
        (
            "image is empty",
            {"Master": replica(1, container(9999, image=""))},
            "Master container 'xgboost' has no image",
        ),
        # "xgboostJob default container name doesn't present".
        (
            "default container missing",
            {"Master": replica(1, container(9999, name=""))},
            "xgbReplicaSpecs.Master must have a container named 'xgboost'",
        ),
        (
            "default container missing on workers",
            {"Master": replica(1), "Worker": replica(2, container(9999, name="main"))},
            "xgbReplicaSpecs.Worker must have a container named 'xgboost'",
        ),
        # "the number of replicas in masterReplica is other than 1".
        ("two masters", {"Master": replica(2)}, "xgbReplicaSpecs.Master.replicas must be 1"),
        ("no master replica", {"Master": replica(0), "Worker": replica(1)}, "Master.replicas must be 1"),
        # "masterReplica does not exist".
        ("no master", {"Worker": replica(1)}, "xgbReplicaSpecs.Master must be present"),
        # validReplicaTypes: Master and Worker only.
        ("unknown type", {"Master": replica(1), "PS": replica(1)}, "unknown replica type"),
        # rSpecs == nil: "must be required".
        ("no replica specs", {}, "has no replica specs"),
    ],
)
def test_validate_refuses_what_the_webhook_refuses(case, specs, message):
    with pytest.raises(InvalidJob, match=message):
        PROFILE.validate(PROFILE.job(cr("test", specs)))


def test_validate_accepts_the_webhook_test_valid_job():
    # xgboostjob_webhook_test.go "valid XGBoostJob": Master 1, Worker 2.
    PROFILE.validate(PROFILE.job(IRIS_TRAIN))


def test_kind_and_names():
    assert (PROFILE.kind, PROFILE.api_version, PROFILE.framework) == (
        "XGBoostJob",
        "kubeflow.org/v1",
        "xgboost",
    )
    # controllerName in xgboostjob_controller.go.
    assert PROFILE.controller_name() == "xgboostjob-controller"
    job = PROFILE.job(CONTROLLER_TEST)
    assert [PROFILE.pod_name(job, g, i) for g in job.groups for i in range(g.replicas)] == [
        "test-job-master-0",
        "test-job-worker-0",
        "test-job-worker-1",
    ]
