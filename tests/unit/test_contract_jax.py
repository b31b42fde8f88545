"""JAXJob's env, roles, status rules and refusals as training-operator v1.9 has them.

Env rows marked "envvar_test.go" are the cases of ``TestSetPodEnv`` in ``pkg/controller.v1/jax/
envvar_test.go``; the others use the shapes of ``jaxjob_controller_test.go`` ("When creating the
JAXJob": ``test-job``, two workers on 6666) and ``examples/jax``. Status messages are
``UpdateJobStatus``'s; the refusals are the cases of ``jaxjob_webhook_test.go``
(``TestValidateV1JAXJob``).
"""

from __future__ import annotations

import pytest
from training_jobs import conditions as cond
from training_jobs.contracts import jax
from training_jobs.model import InvalidJob
from training_jobs.pods import desired_pod
from training_jobs.profiles.base import Context, Counts
from training_jobs.profiles.jax import JAXProfile

PROFILE = JAXProfile()
CTX = Context(config={}, pods={})


def container(ports=None, name="jax", image="test-image"):
    c = {"name": name, "image": image}
    if ports is not None:
        c["ports"] = ports
    return c


def jax_port(port):
    return [{"name": "jaxjob-port", "containerPort": port, "protocol": "TCP"}]


def worker(replicas, *containers, restart_policy=None):
    spec = {"template": {"spec": {"containers": list(containers) or [container(jax_port(6666))]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def cr(name, specs, namespace="jax-test"):
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": {"jaxReplicaSpecs": specs},
    }


def env(port, address, processes, process_id):
    return [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "COORDINATOR_PORT", "value": port},
        {"name": "COORDINATOR_ADDRESS", "value": address},
        {"name": "NUM_PROCESSES", "value": processes},
        {"name": "PROCESS_ID", "value": process_id},
    ]


# jaxjob_controller_test.go "When creating the JAXJob": two workers on jaxjob-port 6666.
CONTROLLER_TEST = cr("test-job", {"Worker": worker(2)})


@pytest.mark.parametrize(
    ("case", "job", "index", "expected"),
    [
        # envvar_test.go "successful environment variable setup".
        (
            "successful environment variable setup",
            cr(
                "test-jaxjob",
                {
                    "Worker": worker(
                        1,
                        container(jax_port(6666), image="docker.io/kubeflow/jaxjob-dist-spmd-mnist:latest"),
                    )
                },
            ),
            0,
            env("6666", "test-jaxjob-worker-0", "1", "0"),
        ),
        # envvar_test.go "missing container port in JAXJob": upstream's setPodEnv errors, but
        # the defaulter it runs after adds jaxjob-port 6666 next to the "wrong-port", so a real
        # job gets 6666.
        (
            "missing container port in JAXJob",
            cr("test-jaxjob", {"Worker": worker(1, container([{"name": "wrong-port", "containerPort": 1}]))}),
            0,
            env("6666", "test-jaxjob-worker-0", "1", "0"),
        ),
        ("controller test, worker-0", CONTROLLER_TEST, 0, env("6666", "test-job-worker-0", "2", "0")),
        ("controller test, worker-1", CONTROLLER_TEST, 1, env("6666", "test-job-worker-0", "2", "1")),
        # examples/jax/cpu-demo/demo.yaml: no ports listed, so the defaulted 6666.
        (
            "cpu-demo, worker-1",
            cr("jaxjob-simple", {"Worker": worker(2, container(), restart_policy="OnFailure")}, "kubeflow"),
            1,
            env("6666", "jaxjob-simple-worker-0", "2", "1"),
        ),
        # A port of its own is worker 0's port as the coordinator.
        (
            "custom port, lower-case type",
            cr("big", {"worker": worker(4, container(jax_port(1234)))}),
            3,
            env("1234", "big-worker-0", "4", "3"),
        ),
    ],
)
def test_env_for_every_pod(case, job, index, expected):
    j = PROFILE.job(job)
    PROFILE.validate(j)
    assert PROFILE.env(j, j.group("Worker"), index, CTX) == expected


def test_env_goes_on_every_container():
    # setPodEnv loops over all of podTemplateSpec.Spec.Containers; init containers get nothing.
    # A variable of the same name in the template is replaced.
    sidecar = {"name": "sidecar", "image": "busybox", "env": [{"name": "PROCESS_ID", "value": "9"}]}
    job = PROFILE.job(cr("two", {"Worker": worker(2, container(), sidecar)}))
    job.group("Worker").template["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    pod = desired_pod(PROFILE, job, job.group("Worker"), 1, CTX)
    expected = env("6666", "two-worker-0", "2", "1")
    assert [c["env"] for c in pod["spec"]["containers"]] == [expected, expected]
    assert "env" not in pod["spec"]["initContainers"][0]


def test_pod_env_contract_directly():
    # replicaName replaces any "/" in the name.
    assert jax.pod_env("a/b", 2, total_replicas=3, coordinator_port=7) == env("7", "a-b-worker-0", "3", "2")


@pytest.mark.parametrize(
    ("tmpl", "expected"),
    [
        ({"spec": {"containers": [{"name": "jax"}]}}, 6666),
        ({"spec": {"containers": [container(jax_port(7777))]}}, 7777),
        ({"spec": {"containers": [container(jax_port(1234), name="proxy"), container()]}}, 6666),
    ],
)
def test_port_of(tmpl, expected):
    assert jax.port_of(tmpl) == expected


def test_defaults_port_and_restart_policy():
    # jax_defaults.go: replicas 1, restartPolicy Never, jaxjob-port 6666 on the jax container.
    group = PROFILE.job(cr("d", {"Worker": worker(None, container())})).group("Worker")
    assert (group.replicas, group.restart_policy) == (1, "Never")
    assert group.containers[0]["ports"] == [{"name": "jaxjob-port", "containerPort": 6666}]


@pytest.mark.parametrize(("index", "expected"), [(0, True), (1, False), (2, False)])
def test_is_master_role(index, expected):
    # IsMasterRole: index == 0; worker 0, the coordinator, gets job-role=master.
    job = PROFILE.job(cr("test-job", {"Worker": worker(3)}))
    group = job.group("Worker")
    assert PROFILE.is_master_role(job, group, index) is expected
    labels = PROFILE.pod_labels(job, group, index)
    assert (labels.get("training.kubeflow.org/job-role") == "master") is expected


@pytest.mark.parametrize(
    ("case", "replicas", "observed", "state", "message"),
    [
        # UpdateJobStatus: every worker succeeded (expected == 0).
        (
            "all workers succeeded",
            2,
            Counts(replicas=2, succeeded=2),
            cond.SUCCEEDED,
            "JAXJob jax-test/test-job successfully completed.",
        ),
        # A job of 0 workers has none left to wait for: upstream calls it done at once.
        (
            "zero workers",
            0,
            Counts(replicas=0),
            cond.SUCCEEDED,
            "JAXJob jax-test/test-job successfully completed.",
        ),
        # jaxjob_controller_test.go: a Running worker makes the job Running, with the namespace.
        (
            "worker running",
            2,
            Counts(replicas=2, active=1, pending=1),
            cond.RUNNING,
            "JAXJob jax-test/test-job is running.",
        ),
        (
            "one done, one running",
            2,
            Counts(replicas=2, succeeded=1, active=1),
            cond.RUNNING,
            "JAXJob jax-test/test-job is running.",
        ),
        (
            "worker failed",
            2,
            Counts(replicas=2, failed=1, active=1),
            cond.FAILED,
            "JAXJob test-job is failed because 1 Worker replica(s) failed.",
        ),
        # A failed pod being recreated (ExitCode, eviction) is a restart, not a failure.
        (
            "worker restarting",
            2,
            Counts(replicas=2, failed=1, restarting=1, active=1),
            cond.RUNNING,
            "JAXJob jax-test/test-job is running.",
        ),
        # failed > 0 && replicas > succeeded + running: with every replica running or done, a
        # failed pod left over (a scale-down's) does not fail the job.
        (
            "surplus failed pod",
            2,
            Counts(replicas=2, failed=1, active=2),
            cond.RUNNING,
            "JAXJob jax-test/test-job is running.",
        ),
        ("nothing started", 2, Counts(replicas=2, pending=2), "", ""),
    ],
)
def test_outcome(case, replicas, observed, state, message):
    job = PROFILE.job(cr("test-job", {"Worker": worker(replicas)}))
    got = PROFILE.outcome(job, {"Worker": observed}, CTX)
    assert (got.state, got.message) == (state, message)


@pytest.mark.parametrize(
    ("case", "specs", "message"),
    [
        # jaxjob_webhook_test.go "no containers".
        (
            "no containers",
            {"Worker": {"template": {"spec": {"containers": []}}}},
            "Worker template has no containers",
        ),
        # "image is empty".
        ("image is empty", {"Worker": worker(1, container(image=""))}, "Worker container 'jax' has no image"),
        # "jaxJob default container name doesn't present".
        (
            "jaxJob default container name doesn't present",
            {"Worker": worker(1, container(name=""))},
            "jaxReplicaSpecs.Worker must have a container named 'jax'",
        ),
        # "replicaSpec is nil".
        ("replicaSpec is nil", None, "has no replica specs"),
        # validRoleTypes: Worker only.
        ("unknown type", {"Worker": worker(1), "Master": worker(1)}, "unknown replica type"),
    ],
)
def test_validate_refuses_what_the_webhook_refuses(case, specs, message):
    with pytest.raises(InvalidJob, match=message):
        PROFILE.validate(PROFILE.job(cr("test", specs)))


def test_validate_accepts_the_webhook_test_valid_job():
    # jaxjob_webhook_test.go "valid JAXJob".
    PROFILE.validate(PROFILE.job(CONTROLLER_TEST))


def test_kind_and_names():
    assert (PROFILE.kind, PROFILE.api_version, PROFILE.framework) == ("JAXJob", "kubeflow.org/v1", "jax")
    # controllerName in jaxjob_controller.go.
    assert PROFILE.controller_name() == "jaxjob-controller"
    job = PROFILE.job(CONTROLLER_TEST)
    group = job.group("Worker")
    assert [PROFILE.pod_name(job, group, i) for i in range(2)] == ["test-job-worker-0", "test-job-worker-1"]
