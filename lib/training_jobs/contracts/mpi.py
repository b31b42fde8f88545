"""MPIJob's contract (training-operator v1.9, ``pkg/controller.v1/mpi``): what the launcher and
the workers get, byte for byte as upstream writes it.

The launcher runs ``mpirun``; OpenMPI (or Intel MPI's hydra) starts each rank with
``kubexec.sh <worker-pod> <command>``, a ``kubectl exec`` through the kubectl binary the
``kubectl-delivery`` init container copies into a shared volume. The hostfile lists every worker;
``discover_hosts.sh`` (Horovod elastic) lists the workers that are Running.
"""

from __future__ import annotations

from typing import Any

DEFAULT_CONTAINER = "mpi"  # what the Kubeflow SDK reads logs from; upstream injects into containers[0]
LAUNCHER, WORKER = "Launcher", "Worker"

CONFIG_SUFFIX = "-config"
LAUNCHER_SUFFIX = "-launcher"
KUBEXEC = "kubexec.sh"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"

KUBECTL_DELIVERY = "kubectl-delivery"
# training-operator's --mpi-kubectl-delivery-image default; MPI_KUBECTL_DELIVERY_IMAGE here.
KUBECTL_DELIVERY_IMAGE = "kubeflow/kubectl-delivery:latest"
KUBECTL_VOLUME, KUBECTL_MOUNT = "mpi-job-kubectl", "/opt/kube"
CONFIG_VOLUME, CONFIG_MOUNT = "mpi-job-config", "/etc/mpi"
SCRIPT_MODE, HOSTFILE_MODE = 0o555, 0o444
INIT_RESOURCES = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}


def config_name(job: str) -> str:
    return job + CONFIG_SUFFIX


def launcher_name(job: str) -> str:
    return job + LAUNCHER_SUFFIX


def worker_name(job: str, index: int) -> str:
    return f"{job}-worker-{index}"


def slots(slots_per_worker: Any) -> int:
    return 1 if slots_per_worker is None else int(slots_per_worker)


def is_gpu_launcher(launcher_template: dict[str, Any]) -> bool:
    """``isGPULauncher``: a launcher container *limits* a resource whose name mentions gpu."""
    for c in (launcher_template.get("spec") or {}).get("containers") or []:
        # Upstream also tests the suffix ".com/gpu", which "gpu" anywhere already covers.
        if any("gpu" in key for key in (c.get("resources") or {}).get("limits") or {}):
            return True
    return False


def kubexec(main_container: str = "") -> str:
    script = f"#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{KUBECTL_MOUNT}/kubectl exec ${{POD_NAME}}"
    if main_container:
        script += f" --container {main_container}"
    return script + ' -- /bin/sh -c "$*"'


def hostfile(job: str, workers: int, slots_per_worker: int, gpu_launcher: bool) -> str:
    lines = [f"{launcher_name(job)} slots={slots_per_worker}\n"] if gpu_launcher else []
    lines += [f"{worker_name(job, i)} slots={slots_per_worker}\n" for i in range(workers)]
    return "".join(lines)


def discover_hosts(job: str, running_workers: list[str], slots_per_worker: int, gpu_launcher: bool) -> str:
    """Upstream's string, its blank line after a GPU launcher included; workers in name order."""
    script = "#!/bin/sh"
    if gpu_launcher:
        script += f"\necho {launcher_name(job)}:{slots_per_worker}\n"
    for name in sorted(running_workers):
        script += f"\necho {name}:{slots_per_worker}"
    return script


def config_data(
    job: str,
    workers: int,
    running_workers: list[str],
    slots_per_worker: int,
    gpu_launcher: bool,
    main_container: str = "",
) -> dict[str, str]:
    return {
        HOSTFILE: hostfile(job, workers, slots_per_worker, gpu_launcher),
        KUBEXEC: kubexec(main_container),
        DISCOVER_HOSTS: discover_hosts(job, running_workers, slots_per_worker, gpu_launcher),
    }


def launcher_role_rules(job: str, workers: int) -> list[dict[str, Any]]:
    """The launcher may read pods and exec into its job's workers (all pods when there are none,
    as upstream's empty resourceNames means)."""
    exec_rule: dict[str, Any] = {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"]}
    if workers:
        exec_rule["resourceNames"] = [worker_name(job, i) for i in range(workers)]
    return [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}, exec_rule]


def role_binding(job: str, namespace: str, service_account: str) -> dict[str, Any]:
    """The RoleBinding's subjects and roleRef."""
    return {
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": launcher_name(job)},
    }


def launcher_env(existing: list[dict[str, Any]], gpu_launcher: bool) -> list[dict[str, Any]]:
    """What the launcher's first container gets, in upstream's order. Intel MPI's two variables
    only when the container does not set them itself."""
    env = [
        {"name": "OMPI_MCA_plm_rsh_agent", "value": f"{CONFIG_MOUNT}/{KUBEXEC}"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": f"{CONFIG_MOUNT}/{HOSTFILE}"},
    ]
    if not gpu_launcher:
        # Keeps the NVIDIA runtime from giving a CPU launcher the node's GPUs.
        env += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
        ]
    names = {e.get("name") for e in existing}
    if "I_MPI_HYDRA_BOOTSTRAP" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "rsh"})
    if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": f"{CONFIG_MOUNT}/{KUBEXEC}"})
    return env


def kubectl_delivery(image: str, namespace: str) -> dict[str, Any]:
    return {
        "name": KUBECTL_DELIVERY,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "TARGET_DIR", "value": KUBECTL_MOUNT}, {"name": "NAMESPACE", "value": namespace}],
        "volumeMounts": [
            {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT},
        ],
        "resources": {"limits": dict(INIT_RESOURCES), "requests": dict(INIT_RESOURCES)},
    }


def launcher_volumes(job: str) -> list[dict[str, Any]]:
    return [
        {"name": KUBECTL_VOLUME, "emptyDir": {}},
        {
            "name": CONFIG_VOLUME,
            "configMap": {
                "name": config_name(job),
                "items": [
                    {"key": KUBEXEC, "path": KUBEXEC, "mode": SCRIPT_MODE},
                    {"key": HOSTFILE, "path": HOSTFILE, "mode": HOSTFILE_MODE},
                    {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": SCRIPT_MODE},
                ],
            },
        },
    ]


def worker_volumes(job: str) -> list[dict[str, Any]]:
    return [
        {
            "name": CONFIG_VOLUME,
            "configMap": {
                "name": config_name(job),
                "items": [{"key": KUBEXEC, "path": KUBEXEC, "mode": SCRIPT_MODE}],
            },
        }
    ]
