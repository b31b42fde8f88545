"""PaddleJob (kubeflow.org/v1) as training-operator v1.9.0 runs it: the env of every pod, the
defaults, the status rules and what its webhook refuses.

Expected values come from upstream's tests where they exist (``paddlepaddle_controller_test.go``
"Should get the corresponding resources successfully"; ``paddlepaddle_webhook_test.go``
TestValidateV1PaddleJob) and otherwise from ``envvar.go``, ``paddlepaddle_controller.go`` and
``paddlepaddle_defautls.go`` at v1.9.0: their order of variables is what is listed.

The registry tells this kind from paddle-operator's PaddleJob by its apiVersion: ``plan`` of a
``kubeflow.org/v1`` PaddleJob uses :class:`KubeflowPaddleProfile`.
"""

from __future__ import annotations

import pytest
from test_plan_status import cr, failed, ok, pending, run
from training_jobs import conditions as cond
from training_jobs.contracts import kubeflow_paddle as kp
from training_jobs.model import InvalidJob
from training_jobs.plan import plan
from training_jobs.profiles.base import Context, Counts
from training_jobs.profiles.kubeflow_paddle import KubeflowPaddleProfile

NOW = "2026-11-23T10:00:00Z"
PROFILE = KubeflowPaddleProfile()
CTX = Context(config={}, pods={})


def var(name, value):
    return {"name": name, "value": value}


POD_IP = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def rspec(replicas=1, policy=None, port=None, containers=("paddle",)):
    container = [
        {"name": n, "image": "registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-cpu"} for n in containers
    ]
    if port:
        container[0]["ports"] = [{"name": "master", "containerPort": port}]
    spec = {"replicas": replicas, "template": {"spec": {"containers": container}}}
    if policy:
        spec["restartPolicy"] = policy
    return spec


def paddlejob(specs, name="job", **spec):
    return cr("kubeflow.org/v1", "PaddleJob", {"paddleReplicaSpecs": specs, **spec}, name=name)


def env_of(job_cr, rtype, index):
    job = PROFILE.job(job_cr)
    PROFILE.validate(job)
    return PROFILE.env(job, job.group(rtype), index, CTX)


def head(job, nnodes):
    return [var("PYTHONUNBUFFERED", "1"), var("PADDLE_JOB_ID", job), var("PADDLE_NNODES", nnodes)]


def pods_of(job_cr):
    result = plan(job_cr, {"pods": [], "services": []}, {}, NOW)
    return {o["metadata"]["name"]: o for o in result["create"] if o["kind"] == "Pod"}


def services_of(job_cr):
    result = plan(job_cr, {"pods": [], "services": []}, {}, NOW)
    return {o["metadata"]["name"]: o for o in result["create"] if o["kind"] == "Service"}


def container_env(pod, container="paddle"):
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return c.get("env")


UPSTREAM_JOB = {"Master": rspec(port=8080), "Worker": rspec(2, port=8080)}


@pytest.mark.parametrize(
    ("case", "job", "rtype", "index", "expected"),
    [
        # paddlepaddle_controller_test.go "Should get the corresponding resources successfully":
        # Master 1 and Worker 2 on port 8080; the master pod's PADDLE_MASTER is
        # "$(POD_IP_DUMMY):8080".
        (
            "upstream's job, the master pod",
            paddlejob(UPSTREAM_JOB, name="test"),
            "Master",
            0,
            [
                *head("test", "3"),
                POD_IP,
                var("PADDLE_MASTER", "$(POD_IP_DUMMY):8080"),
                var("PADDLE_SERVER_NUM", "1"),
            ],
        ),
        # Parameter-server mode: a Worker is one trainer and reaches master 0 by name.
        (
            "upstream's job, worker 1",
            paddlejob(UPSTREAM_JOB, name="test"),
            "Worker",
            1,
            [*head("test", "3"), var("PADDLE_MASTER", "test-master-0:8080"), var("PADDLE_TRAINER_NUM", "1")],
        ),
        # Index 0 of a Worker is not the endpoint when the job has a Master.
        (
            "upstream's job, worker 0",
            paddlejob(UPSTREAM_JOB, name="test"),
            "Worker",
            0,
            [*head("test", "3"), var("PADDLE_MASTER", "test-master-0:8080"), var("PADDLE_TRAINER_NUM", "1")],
        ),
        # Several Masters are several servers; only master 0 is the endpoint.
        (
            "two masters, master 1",
            paddlejob({"Master": rspec(2), "Worker": rspec(2)}),
            "Master",
            1,
            [*head("job", "4"), var("PADDLE_MASTER", "job-master-0:36543"), var("PADDLE_SERVER_NUM", "1")],
        ),
        # The endpoint's port is the Master's "master" port, whatever the Workers declare.
        (
            "master and worker ports differ",
            paddlejob({"Master": rspec(port=9000), "Worker": rspec(1, port=8000)}),
            "Worker",
            0,
            [*head("job", "2"), var("PADDLE_MASTER", "job-master-0:9000"), var("PADDLE_TRAINER_NUM", "1")],
        ),
        (
            "masters only",
            paddlejob({"Master": rspec(2)}),
            "Master",
            1,
            [*head("job", "2"), var("PADDLE_MASTER", "job-master-0:36543"), var("PADDLE_SERVER_NUM", "1")],
        ),
        # Collective mode (no Master): worker 0 is the endpoint, at the default port 36543, and
        # nobody gets PADDLE_SERVER_NUM or PADDLE_TRAINER_NUM.
        (
            "collective, worker 0",
            paddlejob({"Worker": rspec(3)}),
            "Worker",
            0,
            [*head("job", "3"), POD_IP, var("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")],
        ),
        (
            "collective, worker 2",
            paddlejob({"Worker": rspec(3)}),
            "Worker",
            2,
            [*head("job", "3"), var("PADDLE_MASTER", "job-worker-0:36543")],
        ),
        # paddlepaddle_webhook_test.go "valid paddleJob": Worker 2, Never, port "master" 37777.
        (
            "upstream webhook's valid job, worker 1",
            paddlejob({"Worker": {**rspec(2, port=37777), "restartPolicy": "Never"}}, name="test"),
            "Worker",
            1,
            [*head("test", "2"), var("PADDLE_MASTER", "test-worker-0:37777")],
        ),
        # The elastic policy writes no variable in v1.9.0.
        (
            "collective with an elastic policy",
            paddlejob(
                {"Worker": rspec(3)}, elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 2}
            ),
            "Worker",
            2,
            [*head("job", "3"), var("PADDLE_MASTER", "job-worker-0:36543")],
        ),
        # setPaddleTypeNamesToCamelCase: "master" and "WORKER" are Master and Worker.
        (
            "replica types in other cases",
            paddlejob({"master": rspec(), "WORKER": rspec(1)}),
            "Worker",
            0,
            [*head("job", "2"), var("PADDLE_MASTER", "job-master-0:36543"), var("PADDLE_TRAINER_NUM", "1")],
        ),
    ],
)
def test_env_of_a_pod(case, job, rtype, index, expected):
    assert env_of(job, rtype, index) == expected


def test_port_is_read_from_the_paddle_container_only():
    """getPortFromPaddleJob: port "master" of container "paddle"; another container's port of
    that name does not count, and the defaulter gives "paddle" 36543 when it has none."""
    job = paddlejob({"Worker": rspec(2, containers=("sidecar", "paddle"))})
    job["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "master", "containerPort": 1234}
    ]
    assert env_of(job, "Worker", 1)[-1] == var("PADDLE_MASTER", "job-worker-0:36543")


def test_is_master_role():
    """IsMasterRole: every Master pod; in collective mode no pod at all."""
    job = PROFILE.job(paddlejob({"Master": rspec(2), "Worker": rspec(2)}))
    master, worker = job.group("Master"), job.group("Worker")
    assert [PROFILE.is_master_role(job, master, i) for i in (0, 1)] == [True, True]
    assert [PROFILE.is_master_role(job, worker, i) for i in (0, 1)] == [False, False]
    alone = PROFILE.job(paddlejob({"Worker": rspec(2)}))
    assert not PROFILE.is_master_role(alone, alone.group("Worker"), 0)


def test_kind_constants():
    assert (PROFILE.kind, PROFILE.api_version, PROFILE.framework) == (
        "PaddleJob",
        "kubeflow.org/v1",
        "paddle",
    )
    assert (PROFILE.default_container, PROFILE.default_port_name, PROFILE.default_port) == (
        "paddle",
        "master",
        36543,
    )
    assert PROFILE.replica_types == ("Master", "Worker")
    assert PROFILE.replica_specs_field == "paddleReplicaSpecs"
    assert PROFILE.default_restart_policy == "OnFailure"
    assert PROFILE.default_clean_pod_policy == "None"
    assert PROFILE.controller_name() == "paddlejob-controller"


def test_every_container_gets_the_env_and_the_user_value_loses():
    job = paddlejob({"Master": rspec(containers=("paddle", "sidecar")), "Worker": rspec(1)})
    spec = job["spec"]["paddleReplicaSpecs"]["Master"]["template"]["spec"]
    spec["containers"][0]["env"] = [var("PADDLE_MASTER", "elsewhere:1"), var("MY_VAR", "x")]
    spec["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    master = pods_of(job)["job-master-0"]
    expected = [
        *head("job", "2"),
        POD_IP,
        var("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
        var("PADDLE_SERVER_NUM", "1"),
    ]
    assert container_env(master, "sidecar") == expected
    assert container_env(master) == [var("MY_VAR", "x"), *expected]
    assert "env" not in master["spec"]["initContainers"][0]


def test_defaults_restart_policy_port_labels_and_services():
    """SetDefaults_PaddleJob: OnFailure and the "master" port 36543 on the paddle container;
    the upstream controller test's owner reference and Service port."""
    pods = pods_of(paddlejob({"Master": rspec(), "Worker": rspec(1)}))
    master = pods["job-master-0"]
    assert master["spec"]["restartPolicy"] == "OnFailure"
    assert master["spec"]["containers"][0]["ports"] == [{"name": "master", "containerPort": 36543}]
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "paddlejob-controller",
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert master["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PaddleJob",
            "name": "job",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "training.kubeflow.org/job-role" not in pods["job-worker-0"]["metadata"]["labels"]
    alone = pods_of(paddlejob({"Worker": rspec(2)}))
    assert "training.kubeflow.org/job-role" not in alone["job-worker-0"]["metadata"]["labels"]
    services = services_of(paddlejob(UPSTREAM_JOB, name="test"))
    assert services["test-master-0"]["spec"]["ports"] == [
        {"name": "master", "port": 8080, "targetPort": 8080}
    ]


MASTER_JOB = {"Master": rspec(policy="Never"), "Worker": rspec(2, policy="Never")}
COLLECTIVE = {"Worker": rspec(2, policy="Never")}


@pytest.mark.parametrize(
    ("case", "specs", "spec", "phases", "state", "message"),
    [
        ("master running", MASTER_JOB, {}, {}, cond.RUNNING, "PaddleJob job is running."),
        # The upstream controller test: the master pod Succeeded makes the job Succeeded.
        (
            "master succeeded, workers running",
            MASTER_JOB,
            {},
            {"job-master-0": ok()},
            cond.SUCCEEDED,
            "PaddleJob job is successfully completed.",
        ),
        (
            "master succeeded as a worker failed",
            MASTER_JOB,
            {},
            {"job-master-0": ok(), "job-worker-1": failed()},
            cond.SUCCEEDED,
            "PaddleJob job is successfully completed.",
        ),
        (
            "one of two masters succeeded",
            {"Master": rspec(2, policy="Never"), "Worker": rspec(1, policy="Never")},
            {},
            {"job-master-0": ok()},
            cond.RUNNING,
            "PaddleJob job is running.",
        ),
        (
            "a worker failed under Never",
            MASTER_JOB,
            {},
            {"job-worker-1": failed()},
            cond.FAILED,
            "PaddleJob job is failed because 1 Worker replica(s) failed.",
        ),
        (
            "the master failed under Never",
            MASTER_JOB,
            {},
            {"job-master-0": failed()},
            cond.FAILED,
            "PaddleJob job is failed because 1 Master replica(s) failed.",
        ),
        # With a Master, running Workers alone do not make the job Running.
        (
            "master pending, workers running",
            MASTER_JOB,
            {},
            {"job-master-0": pending()},
            cond.CREATED,
            "PaddleJob job is created.",
        ),
        ("workers running", COLLECTIVE, {}, {}, cond.RUNNING, "PaddleJob ns/job is running."),
        (
            "one of two workers succeeded",
            COLLECTIVE,
            {},
            {"job-worker-0": ok()},
            cond.RUNNING,
            "PaddleJob ns/job is running.",
        ),
        (
            "all workers succeeded",
            COLLECTIVE,
            {},
            {"job-worker-0": ok(), "job-worker-1": ok()},
            cond.SUCCEEDED,
            "PaddleJob ns/job successfully completed.",
        ),
        # No elastic success rule in v1.9.0: one worker done is not the job done.
        (
            "elastic, one worker succeeded",
            COLLECTIVE,
            {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}},
            {"job-worker-1": ok()},
            cond.RUNNING,
            "PaddleJob ns/job is running.",
        ),
        (
            "a worker failed under Never, collective",
            COLLECTIVE,
            {},
            {"job-worker-0": failed()},
            cond.FAILED,
            "PaddleJob job is failed because 1 Worker replica(s) failed.",
        ),
    ],
)
def test_status(case, specs, spec, phases, state, message):
    result = run(paddlejob(specs, **spec), phases)
    last = result["status"]["conditions"][-1]
    assert (last["type"], last["message"]) == (state, message)


def test_a_failed_worker_under_on_failure_restarts():
    """Upstream's restarting branch: any policy but Never recreates the pod."""
    result = run(paddlejob({"Worker": rspec(2)}), {"job-worker-1": failed()})
    assert result["status"]["conditions"][-1]["type"] == cond.RESTARTING
    assert [o["name"] for o in result["delete"]] == ["job-worker-1"]


def counts(replicas, **kw):
    return Counts(replicas=replicas, **kw)


@pytest.mark.parametrize(
    ("case", "specs", "by_type", "state"),
    [
        # `failed > 0 && specReplicas > succeeded+running`: surplus failed pods do not fail a job
        # whose replicas are all running.
        (
            "surplus failed pod",
            COLLECTIVE,
            {"Worker": counts(2, active=2, failed=1)},
            cond.RUNNING,
        ),
        (
            "failed pod being recreated",
            COLLECTIVE,
            {"Worker": counts(2, active=1, failed=1, restarting=1)},
            cond.RUNNING,
        ),
        ("nothing running yet", COLLECTIVE, {"Worker": counts(2, pending=2)}, ""),
        # `expected == 0` with 0 replicas: upstream completes such a job at once.
        (
            "master scaled to 0",
            {"Master": rspec(0), "Worker": rspec(1)},
            {"Master": counts(0), "Worker": counts(1, active=1)},
            cond.SUCCEEDED,
        ),
        ("workers scaled to 0", {"Worker": rspec(0)}, {"Worker": counts(0)}, cond.SUCCEEDED),
    ],
)
def test_outcome_rules(case, specs, by_type, state):
    job = PROFILE.job(paddlejob(specs))
    assert PROFILE.outcome(job, by_type, CTX).state == state


@pytest.mark.parametrize(
    ("case", "specs", "spec", "error"),
    [
        # TestValidateV1PaddleJob "replicaSpec is nil" (an empty map as well).
        ("replicaSpec is nil", None, {}, "the job has no replica specs"),
        ("no replica types", {}, {}, "the job has no replica specs"),
        # "no containers"
        (
            "no containers",
            {"Worker": {"template": {"spec": {"containers": []}}}},
            {},
            "Worker template has no containers",
        ),
        # "image is empty"
        (
            "image is empty",
            {"Worker": {"template": {"spec": {"containers": [{"name": "paddle", "image": ""}]}}}},
            {},
            "Worker container 'paddle' has no image",
        ),
        # "paddle default container name doesn't find"
        (
            "paddle default container name doesn't find",
            {"Worker": rspec(1, containers=("trainer",))},
            {},
            "paddleReplicaSpecs.Worker must have a container named 'paddle'",
        ),
        # validateSpec: field.NotSupported for a type other than Master and Worker.
        (
            "unsupported replica type",
            {"Worker": rspec(1), "PS": rspec(1)},
            {},
            "unknown replica type.s. PS: use Master, Worker",
        ),
        (
            "restart policy",
            {"Worker": rspec(1, policy="Sometimes")},
            {},
            "restartPolicy 'Sometimes' is not one of",
        ),
        # setPaddleElasticPolicy dereferences the missing Worker spec.
        (
            "elastic policy without workers or bounds",
            {"Master": rspec()},
            {"elasticPolicy": {"maxRestarts": 3}},
            "add a Worker or set elasticPolicy.minReplicas and maxReplicas",
        ),
    ],
)
def test_webhook_refusals(case, specs, spec, error):
    job = paddlejob(specs, **spec)
    if specs is None:
        del job["spec"]["paddleReplicaSpecs"]
    with pytest.raises(InvalidJob, match=error):
        PROFILE.validate(PROFILE.job(job))


@pytest.mark.parametrize(
    ("case", "specs", "spec"),
    [
        ("valid paddleJob", {"Worker": {**rspec(2, port=37777), "restartPolicy": "Never"}}, {}),
        ("elastic with workers", {"Worker": rspec(2)}, {"elasticPolicy": {}}),
        ("elastic bounds without workers", {"Master": rspec()}, {"elasticPolicy": {"minReplicas": 1}}),
        ("masters only", {"Master": rspec(3)}, {}),
    ],
)
def test_accepted(case, specs, spec):
    PROFILE.validate(PROFILE.job(paddlejob(specs, **spec)))


def test_a_refused_job_fails_with_the_reason():
    result = plan(paddlejob({"Worker": rspec(1, containers=("trainer",))}), {}, {}, NOW)
    last = result["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == (cond.FAILED, "PaddleJobFailedValidation")
    assert last["message"].startswith("PaddleJob job is invalid: paddleReplicaSpecs.Worker must have")
    assert result["create"] == []


@pytest.mark.parametrize(
    ("policy", "workers", "expected"),
    [
        (None, 2, None),
        ({}, 3, {"minReplicas": 3, "maxReplicas": 3}),
        ({"maxReplicas": 4}, 1, {"minReplicas": 4, "maxReplicas": 4}),
        ({"minReplicas": 2}, 1, {"minReplicas": 2, "maxReplicas": 2}),
        ({"minReplicas": 1, "maxReplicas": 5}, 3, {"minReplicas": 1, "maxReplicas": 5}),
        ({"maxRestarts": 3}, 2, {"maxRestarts": 3, "minReplicas": 2, "maxReplicas": 2}),
        ({"minReplicas": 1}, None, {"minReplicas": 1, "maxReplicas": 1}),
    ],
)
def test_elastic_policy_defaults(policy, workers, expected):
    """setPaddleElasticPolicy: min and max fill each other, else take the Worker replicas."""
    assert kp.defaulted_elastic(policy, workers) == expected


def test_elastic_policy_without_workers_cannot_be_defaulted():
    with pytest.raises(ValueError, match="needs a Worker spec"):
        kp.defaulted_elastic({}, None)


def test_the_pods_of_paddle_operators_same_named_job_are_not_this_jobs():
    """Both PaddleJob kinds label their pods ``operator-name: paddlejob-controller``: a failed pod
    of paddle-operator's job of the same name, listed by those labels, is another controller's
    and neither fails nor counts for this job."""
    job = paddlejob({"Worker": rspec(1, policy="Never")})
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "job-worker-0",
            "namespace": "ns",
            "labels": {
                "training.kubeflow.org/operator-name": "paddlejob-controller",
                "training.kubeflow.org/job-name": "job",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch.paddlepaddle.org/v1",
                    "kind": "PaddleJob",
                    "uid": "uid-2",
                    "controller": True,
                }
            ],
        },
        "status": {"phase": "Failed"},
    }
    result = plan(job, {"pods": [foreign], "services": []}, {}, NOW)
    assert result["status"]["replicaStatuses"]["Worker"]["failed"] == 0
    assert cond.FAILED not in [c["type"] for c in result["status"]["conditions"]]
