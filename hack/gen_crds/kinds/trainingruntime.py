"""Kubeflow Trainer v2.3's TrainingRuntime (namespaced) and ClusterTrainingRuntime (cluster-wide):
the shape of TrainJobs, a JobSet template with an ML policy and a gang-scheduling policy."""

from __future__ import annotations

from ..jobset import jobset_spec
from ..kind import Kind
from ..podtemplate import EMBEDDED_OBJECT_META
from ..runtime_patch import keyed_list
from ..schema import Schema, boolean, integer, obj, rule, string
from ..trainer_admission import runtime_policy
from .trainjob import GROUP, VERSION

POLICIES = ["torch", "mpi", "jax", "xgboost", "flux"]


def torch() -> Schema:
    names = {
        "description": "Containers of that job that get the PET_* variables (never node, which always does).",
        "type": "array",
        "items": {"type": "string", "maxLength": 63, "description": "A container name."},
        "minItems": 1,
        "maxItems": 8,
        "x-kubernetes-list-type": "set",
        "x-kubernetes-validations": [
            rule(
                "!self.exists(c, c == 'node')",
                "containerNames must not include node: the node container always gets the PET_* "
                "variables; remove it",
            )
        ],
    }
    target = obj(
        "A replicated job and the containers in it that get the PET_* variables.",
        {
            "jobName": string("The replicated job (e.g. node).", minLength=1, maxLength=253),
            "containerNames": names,
        },
        required=["containerNames", "jobName"],
    )
    return obj(
        "PyTorch: torchrun's PET_* variables in the node container.",
        {
            "envInjection": obj(
                "Other containers that get the PET_* variables too.",
                {"targets": keyed_list("The containers, by replicated job.", target, 16, key="jobName")},
            )
        },
    )


def mpi() -> Schema:
    return obj(
        "MPI: an SSH key Secret, a hostfile ConfigMap and OMPI_MCA_* variables; mpirun runs in the launcher.",
        {
            "numProcPerNode": integer("Slots per node in the hostfile.", default=1),
            "mpiImplementation": string(
                "The MPI implementation the hostfile is for.", default="OpenMPI", enum=["OpenMPI", ""]
            ),
            "sshAuthMountPath": string(
                "Where the SSH keys are mounted.", default="/root/.ssh", maxLength=4096
            ),
            "runLauncherAsNode": boolean(
                "The launcher is a training node too (it runs a rank).", default=False
            ),
        },
    )


def flux() -> Schema:
    procs = integer("Processes per node.", default=1)
    procs["x-kubernetes-validations"] = [
        rule("self >= 1", "mlPolicy.flux.numProcPerNode must be at least 1: raise it")
    ]
    return obj("Flux framework (HPC): a Flux broker in every node.", {"numProcPerNode": procs})


def ml_policy() -> Schema:
    present = ", ".join(f"has(self.{p})" for p in POLICIES)
    return obj(
        "How the framework's processes find each other. At most one of torch, mpi, jax, xgboost and "
        "flux; none: plain ML (nothing injected).",
        {
            "numNodes": integer("Number of training nodes unless the TrainJob says. Defaults to 1."),
            "torch": torch(),
            "mpi": mpi(),
            "flux": flux(),
            "jax": obj("JAX: JAX_NUM_PROCESSES, JAX_PROCESS_ID and JAX_COORDINATOR_ADDRESS.", {}),
            "xgboost": obj("XGBoost: DMLC_* variables and a tracker on rank 0.", {}),
        },
        rules=[
            rule(
                f"[{present}].filter(x, x).size() <= 1",
                "mlPolicy may configure only one of torch, mpi, jax, xgboost and flux: keep one",
            )
        ],
    )


def pod_group_policy() -> Schema:
    topology = obj(
        "Volcano's network topology constraint (with its HyperNodes).",
        {
            "mode": string("hard or soft.", default="hard", enum=["hard", "soft"]),
            "highestTierAllowed": {
                "description": "Highest network tier the gang may span.",
                "type": "integer",
                "default": 1,
            },
        },
    )
    return obj(
        "Gang scheduling: a PodGroup of all the TrainJob's pods. One of coscheduling and volcano.",
        {
            "coscheduling": obj(
                "scheduler-plugins' coscheduling PodGroup.",
                {
                    "scheduleTimeoutSeconds": integer(
                        "How long the gang may wait to be scheduled together.", default=60
                    )
                },
            ),
            "volcano": obj("Volcano's PodGroup.", {"networkTopology": topology}),
        },
    )


def template() -> Schema:
    meta: Schema = dict(EMBEDDED_OBJECT_META)
    meta["description"] = "Labels and annotations of the JobSet; its name and namespace are the TrainJob's."
    out = obj(
        "The JobSet every TrainJob of this runtime gets.",
        {"metadata": meta, "spec": jobset_spec("The JobSet's spec (jobset.x-k8s.io/v1alpha2).")},
    )
    out["minProperties"] = 1
    return out


def runtime_spec(kind: str) -> Schema:
    out = obj(
        f"Desired state of the {kind}.",
        {"mlPolicy": ml_policy(), "podGroupPolicy": pod_group_policy(), "template": template()},
    )
    out["minProperties"] = 1
    return out


def _runtime(kind: str, plural: str, scope: str, description: str) -> Kind:
    return Kind(
        group=GROUP,
        version=VERSION,
        kind=kind,
        plural=plural,
        short_names=[],
        description=description,
        spec=runtime_spec(kind),
        status=None,
        root_rules=[],
        columns=[],
        policy=runtime_policy,
        scope=scope,
        categories=["kubeflow"],
        spec_required=False,
    )


def trainingruntime() -> Kind:
    return _runtime(
        "TrainingRuntime",
        "trainingruntimes",
        "Namespaced",
        "A training runtime (Kubeflow Trainer v2.3 compatible) that TrainJobs of its namespace name in "
        "spec.runtimeRef.",
    )


def clustertrainingruntime() -> Kind:
    return _runtime(
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        "Cluster",
        "A training runtime (Kubeflow Trainer v2.3 compatible) that TrainJobs of every namespace name in "
        "spec.runtimeRef, such as the built-in torch-distributed.",
    )
