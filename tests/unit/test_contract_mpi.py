"""MPIJob's objects, env, status rules and refusals as training-operator v1.9 has them.

Strings are ``pkg/controller.v1/mpi/mpijob_controller.go``'s (``newConfigMap``,
``updateDiscoverHostsInConfigMap``, ``newLauncherRole``, ``newLauncher``, ``newWorker``); the
cases named after ``mpijob_controller_test.go`` ("Test launcher is GPU launcher", "Intel MPI
handling"), ``mpi_defaults_test.go`` and ``mpi_validation_test.go`` use their shapes.
"""

from __future__ import annotations

import pytest
from training_jobs import conditions as cond
from training_jobs.contracts import mpi
from training_jobs.model import InvalidJob
from training_jobs.plan import plan
from training_jobs.pods import desired_pod
from training_jobs.profiles.base import Context, Counts
from training_jobs.profiles.mpi import MPIProfile

PROFILE = MPIProfile()
NOW = "2026-01-01T00:00:00Z"


def container(name="foo", image="bar", **extra):
    return {"name": name, "image": image, **extra}


def replica(replicas=None, *containers, restart_policy=None):
    spec = {"template": {"spec": {"containers": list(containers) or [container()]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def cr(name="test", launcher=None, workers=2, namespace="default", **spec):
    specs = {"Launcher": launcher or replica(1)}
    if workers is not None:
        specs["Worker"] = replica(workers)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": {"mpiReplicaSpecs": specs, **spec},
    }


def pod(name, rtype, phase, index=None):
    labels = {
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/job-name": "test",
        "training.kubeflow.org/replica-type": rtype,
    }
    if index is not None:
        labels["training.kubeflow.org/replica-index"] = str(index)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "uid": f"uid-{name}"},
        "status": {"phase": phase},
    }


def gpu(resource="nvidia.com/gpu"):
    return replica(1, container(resources={"limits": {resource: 1}}))


# --- the ConfigMap ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("main_container", "expected"),
    [
        ("", '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"'),
        (
            "mpi",
            "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container mpi "
            '-- /bin/sh -c "$*"',
        ),
    ],
)
def test_kubexec(main_container, expected):
    assert mpi.kubexec(main_container) == expected


@pytest.mark.parametrize(
    ("workers", "slots", "gpu_launcher", "expected"),
    [
        (2, 1, False, "pi-worker-0 slots=1\npi-worker-1 slots=1\n"),
        (0, 1, False, ""),
        (1, 4, True, "pi-launcher slots=4\npi-worker-0 slots=4\n"),
    ],
)
def test_hostfile(workers, slots, gpu_launcher, expected):
    assert mpi.hostfile("pi", workers, slots, gpu_launcher) == expected


@pytest.mark.parametrize(
    ("running", "gpu_launcher", "expected"),
    [
        (["pi-worker-1", "pi-worker-0"], False, "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-1:1"),
        ([], False, "#!/bin/sh"),
        # Upstream's blank line after a GPU launcher, kept.
        (["pi-worker-0"], True, "#!/bin/sh\necho pi-launcher:1\n\necho pi-worker-0:1"),
        # A plain string sort, as upstream's: worker-10 before worker-2.
        (["pi-worker-2", "pi-worker-10"], False, "#!/bin/sh\necho pi-worker-10:1\necho pi-worker-2:1"),
    ],
)
def test_discover_hosts(running, gpu_launcher, expected):
    assert mpi.discover_hosts("pi", running, 1, gpu_launcher) == expected


@pytest.mark.parametrize(
    ("case", "launcher", "expected"),
    [
        ("isNvidiaGPU", gpu("nvidia.com/gpu"), True),
        ("isExtendedGPU", gpu("vendor-domain/gpu"), True),
        ("notGPU", gpu("vendor-domain/resourcetype"), False),
        (
            "requests do not count",
            replica(1, container(resources={"requests": {"nvidia.com/gpu": 1}})),
            False,
        ),
    ],
)
def test_launcher_is_gpu_launcher(case, launcher, expected):
    assert mpi.is_gpu_launcher(launcher["template"]) is expected


def test_role_rules_name_the_workers_and_all_pods_without_workers():
    assert mpi.launcher_role_rules("test", 2) == [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        {
            "verbs": ["create"],
            "apiGroups": [""],
            "resources": ["pods/exec"],
            "resourceNames": ["test-worker-0", "test-worker-1"],
        },
    ]
    assert "resourceNames" not in mpi.launcher_role_rules("test", 0)[1]


# --- pods --------------------------------------------------------------------------------------


def pods_of(job_cr, config=None):
    job = PROFILE.job(job_cr)
    ctx = Context(config=config or {}, pods={})
    return {
        PROFILE.pod_name(job, g, i): desired_pod(PROFILE, job, g, i, ctx)
        for g in job.groups
        for i in range(g.replicas)
    }


def env_of(p, index=0):
    return [(e["name"], e.get("value")) for e in p["spec"]["containers"][index].get("env") or []]


def test_launcher_pod():
    pods = pods_of(cr())
    launcher = pods["test-launcher"]
    assert launcher["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/job-name": "test",
        "training.kubeflow.org/replica-type": "launcher",
        "training.kubeflow.org/job-role": "master",
    }
    spec = launcher["spec"]
    assert spec["serviceAccountName"] == "test-launcher"
    assert spec["restartPolicy"] == "Never"
    assert env_of(launcher) == [
        ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("NVIDIA_DRIVER_CAPABILITIES", ""),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
    ]
    (init,) = spec["initContainers"]
    limits = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    assert init == {
        "name": "kubectl-delivery",
        "image": "kubeflow/kubectl-delivery:latest",
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "TARGET_DIR", "value": "/opt/kube"}, {"name": "NAMESPACE", "value": "default"}],
        "volumeMounts": [
            {"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
            {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
        ],
        "resources": {"limits": limits, "requests": limits},
    }
    assert spec["volumes"] == [
        {"name": "mpi-job-kubectl", "emptyDir": {}},
        {
            "name": "mpi-job-config",
            "configMap": {
                "name": "test-config",
                "items": [
                    {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                    {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                    {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
                ],
            },
        },
    ]


def test_the_kubectl_delivery_image_is_the_operators_setting():
    pods = pods_of(cr(), {"mpi_kubectl_delivery_image": "mirror.example/kubectl-delivery:v1.9"})
    assert (
        pods["test-launcher"]["spec"]["initContainers"][0]["image"] == "mirror.example/kubectl-delivery:v1.9"
    )


def test_a_gpu_launcher_keeps_its_gpus_visible():
    names = [n for n, _ in env_of(pods_of(cr(launcher=gpu()))["test-launcher"])]
    assert "NVIDIA_VISIBLE_DEVICES" not in names and "NVIDIA_DRIVER_CAPABILITIES" not in names


@pytest.mark.parametrize(
    ("case", "env", "bootstrap", "bootstrap_exec"),
    [
        (
            "withoutIMPIValues",
            [{"name": "X_MPI_HYDRA_BOOTSTRAP", "value": "foo"}],
            "rsh",
            "/etc/mpi/kubexec.sh",
        ),
        (
            "withIMPIBootstrap",
            [{"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "RSH"}],
            "RSH",
            "/etc/mpi/kubexec.sh",
        ),
        (
            "withIMPIBootstrapExec",
            [{"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": "/script.sh"}],
            "rsh",
            "/script.sh",
        ),
        (
            "withIMPIBootstrapAndExec",
            [
                {"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "RSH"},
                {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": "/script.sh"},
            ],
            "RSH",
            "/script.sh",
        ),
    ],
)
def test_intel_mpi_handling(case, env, bootstrap, bootstrap_exec):
    launcher = pods_of(cr(launcher=replica(1, container(env=env))))["test-launcher"]
    assert len(launcher["spec"]["containers"]) == 1
    values = dict(env_of(launcher))
    assert (values["I_MPI_HYDRA_BOOTSTRAP"], values["I_MPI_HYDRA_BOOTSTRAP_EXEC"]) == (
        bootstrap,
        bootstrap_exec,
    )


def test_a_template_service_account_is_the_launchers():
    launcher = replica(1)
    launcher["template"]["spec"]["serviceAccountName"] = "launcher-sa"
    assert pods_of(cr(launcher=launcher))["test-launcher"]["spec"]["serviceAccountName"] == "launcher-sa"


def test_worker_pods_idle_unless_they_have_a_command():
    job = cr()
    job["spec"]["mpiReplicaSpecs"]["Worker"] = replica(2, container(), container(name="side", command=["x"]))
    workers = [p for n, p in sorted(pods_of(job).items()) if "-worker-" in n]
    assert [p["metadata"]["name"] for p in workers] == ["test-worker-0", "test-worker-1"]
    first, side = workers[1]["spec"]["containers"]
    assert (first["command"], first["args"]) == (["sleep"], ["365d"])
    assert side["command"] == ["x"] and "args" not in side
    assert "env" not in first
    assert first["volumeMounts"] == [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
    assert workers[1]["spec"]["volumes"] == [
        {
            "name": "mpi-job-config",
            "configMap": {
                "name": "test-config",
                "items": [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}],
            },
        }
    ]
    assert workers[1]["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in workers[1]["metadata"]["labels"]
    commanded = cr()
    commanded["spec"]["mpiReplicaSpecs"]["Worker"] = replica(1, container(command=["sshd"], args=["-D"]))
    c = pods_of(commanded)["test-worker-0"]["spec"]["containers"][0]
    assert (c["command"], c["args"]) == (["sshd"], ["-D"])


# --- defaults and validation (mpi_defaults_test.go, mpi_validation_test.go) ---------------------


def test_defaults():
    job = PROFILE.job(
        cr(launcher={"template": {"spec": {"containers": [container()]}}}, workers=None)
        | {"spec": {"mpiReplicaSpecs": {"Launcher": replica(), "Worker": replica()}}}
    )
    assert [(g.rtype, g.replicas, g.restart_policy) for g in job.groups] == [
        ("Launcher", 1, "Never"),
        ("Worker", 0, "Never"),
    ]
    assert PROFILE.clean_pod_policy(job) == "None"
    deprecated = PROFILE.job(cr(cleanPodPolicy="All"))
    assert PROFILE.clean_pod_policy(deprecated) == "All"
    both = PROFILE.job(cr(cleanPodPolicy="All", runPolicy={"cleanPodPolicy": "Running"}))
    assert PROFILE.clean_pod_policy(both) == "Running"


@pytest.mark.parametrize(
    ("case", "specs", "message"),
    [
        ("nil specs", {}, "no replica specs"),
        ("no containers", {"Launcher": {"template": {"spec": {"containers": []}}}}, "no containers"),
        ("no image", {"Launcher": replica(1, container(image=""))}, "has no image"),
        (
            "no name",
            {"Launcher": replica(1, {"image": "kubeflow/tf-dist-mnist-test:1.0"})},
            "container without a name",
        ),
        (
            "two launchers",
            {"Launcher": replica(2, container(name="tensorflow"))},
            "Launcher.replicas must be 1",
        ),
        ("no launcher", {"Worker": replica(1)}, "Launcher is required"),
        ("launcher in lower case", {"launcher": replica(1)}, "unknown replica type(s) launcher"),
    ],
)
def test_validation(case, specs, message):
    job_cr = cr()
    job_cr["spec"]["mpiReplicaSpecs"] = specs
    with pytest.raises(InvalidJob, match=message.replace("(", r"\(").replace(")", r"\)")):
        PROFILE.validate(PROFILE.job(job_cr))


# --- status (UpdateJobStatus) --------------------------------------------------------------------


def counts(launcher=(0, 0, 0), worker=(0, 0, 0)):
    def c(replicas, t):
        active, succeeded, failed = t
        return Counts(replicas=replicas, active=active, succeeded=succeeded, failed=failed)

    return {"Launcher": c(1, launcher), "Worker": c(2, worker)}


@pytest.mark.parametrize(
    ("case", "c", "state", "message"),
    [
        (
            "launcher succeeded",
            counts(launcher=(0, 1, 0)),
            cond.SUCCEEDED,
            "MPIJob test is successfully completed.",
        ),
        (
            "launcher failed",
            counts(launcher=(0, 0, 1)),
            cond.FAILED,
            "MPIJob test is failed because 1 Launcher replica(s) failed.",
        ),
        (
            "a worker failed",
            counts(launcher=(1, 0, 0), worker=(1, 0, 1)),
            cond.FAILED,
            "MPIJob test is failed because 1 Worker replica(s) failed.",
        ),
        (
            "launcher running, workers pending",
            counts(launcher=(1, 0, 0)),
            cond.RUNNING,
            "MPIJob test is running.",
        ),
        ("workers running, no launcher yet", counts(worker=(2, 0, 0)), "", ""),
    ],
)
def test_the_launcher_decides(case, c, state, message):
    outcome = PROFILE.outcome(PROFILE.job(cr()), c, Context(config={}, pods={}))
    assert (outcome.state, outcome.message) == (state, message)


# --- plans -------------------------------------------------------------------------------------


def observed(*pods, **extras):
    return {"pods": list(pods), "configmaps": [], **extras}


def test_the_first_pass_creates_the_launchers_objects_then_the_workers_then_the_launcher():
    result = plan(cr(), observed(), {}, NOW)
    assert [(o["kind"], o["metadata"]["name"]) for o in result["create"]] == [
        ("ServiceAccount", "test-launcher"),
        ("ConfigMap", "test-config"),
        ("Role", "test-launcher"),
        ("RoleBinding", "test-launcher"),
        ("Pod", "test-launcher"),
        ("Pod", "test-worker-0"),
        ("Pod", "test-worker-1"),
    ]
    created = {o["kind"]: o for o in result["create"]}
    for kind in ("ServiceAccount", "ConfigMap", "Role", "RoleBinding"):
        meta = created[kind]["metadata"]
        assert meta["labels"]["app"] == "test"
        assert meta["labels"]["training.kubeflow.org/job-name"] == "test"
        assert meta["ownerReferences"][0]["kind"] == "MPIJob"
    assert created["ConfigMap"]["data"]["hostfile"] == "test-worker-0 slots=1\ntest-worker-1 slots=1\n"
    assert created["ConfigMap"]["data"]["discover_hosts.sh"] == "#!/bin/sh"
    assert created["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "test-launcher", "namespace": "default"}
    ]
    assert created["RoleBinding"]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "test-launcher",
    }
    assert not any(o["kind"] == "Service" for o in result["create"])


def _existing(job_cr):
    """The launcher's objects as the first pass created them."""
    first = plan(job_cr, observed(), {}, NOW)
    objs = {o["kind"]: o for o in first["create"] if o["kind"] != "Pod"}
    return {
        "configmaps": [objs["ConfigMap"]],
        "serviceaccounts": [objs["ServiceAccount"]],
        "roles": [objs["Role"]],
        "rolebindings": [objs["RoleBinding"]],
    }


def test_discover_hosts_follows_the_running_workers_and_nothing_else_is_written_again():
    job_cr = cr()
    extras = _existing(job_cr)
    pods = [
        pod("test-launcher", "launcher", "Running"),
        pod("test-worker-0", "worker", "Running", 0),
        pod("test-worker-1", "worker", "Pending", 1),
    ]
    result = plan(job_cr, observed(*pods, **extras), {}, NOW)
    assert result["create"] == []
    (patch,) = result["patch"]
    assert (patch["kind"], patch["data"]["discover_hosts.sh"]) == (
        "ConfigMap",
        "#!/bin/sh\necho test-worker-0:1",
    )
    assert cond.current_state(result["status"]["conditions"]) == cond.RUNNING
    extras["configmaps"] = [patch]
    again = plan(job_cr, observed(*pods, **extras), {}, NOW)
    assert again["patch"] == [] and again["create"] == []


def test_scaling_the_workers_rewrites_the_hostfile_and_the_role():
    extras = _existing(cr(workers=2))
    result = plan(cr(workers=3), observed(**extras), {}, NOW)
    patched = {o["kind"]: o for o in result["patch"]}
    assert patched["ConfigMap"]["data"]["hostfile"].count("\n") == 3
    assert patched["Role"]["rules"][1]["resourceNames"] == ["test-worker-0", "test-worker-1", "test-worker-2"]


def test_success_leaves_the_idle_workers_by_default():
    job_cr = cr()
    pods = [
        pod("test-launcher", "launcher", "Succeeded"),
        pod("test-worker-0", "worker", "Running", 0),
        pod("test-worker-1", "worker", "Running", 1),
    ]
    result = plan(job_cr, observed(*pods, **_existing(job_cr)), {}, NOW)
    succeeded = cond.find(result["status"]["conditions"], cond.SUCCEEDED)
    assert succeeded["message"] == "MPIJob test is successfully completed."
    assert succeeded["reason"] == "MPIJobSucceeded"
    assert result["delete"] == []
    running = plan(cr(runPolicy={"cleanPodPolicy": "Running"}), observed(*pods, **_existing(job_cr)), {}, NOW)
    assert sorted(r["name"] for r in running["delete"]) == ["test-worker-0", "test-worker-1"]


def test_a_failed_worker_fails_the_job():
    job_cr = cr()
    pods = [
        pod("test-launcher", "launcher", "Running"),
        pod("test-worker-0", "worker", "Failed", 0),
        pod("test-worker-1", "worker", "Running", 1),
    ]
    result = plan(job_cr, observed(*pods, **_existing(job_cr)), {}, NOW)
    failed = cond.find(result["status"]["conditions"], cond.FAILED)
    assert (failed["reason"], failed["message"]) == (
        "MPIJobFailed",
        "MPIJob test is failed because 1 Worker replica(s) failed.",
    )
