"""Kubeflow Trainer v2.3's names: API groups, labels, env names, condition types, reasons, messages.

Upstream sources (kubeflow/trainer, tag v2.3.0): ``pkg/constants/constants.go``,
``pkg/apis/trainer/v1alpha1/{trainjob,trainingruntime}_types.go`` (and the CRD defaults they
declare), ``pkg/runtime/framework/plugins/jobset/constants``, ``pkg/util/trainjob``. The values are
what clients and other controllers read (the SDK, Kueue, the JobSet controller), so they are
copied exactly; the accessors below read a TrainJob or runtime as the API server serves it, with
the CRD's defaults applied when a field is missing (a TrainJob written by a test, or by an older
CRD).
"""

from __future__ import annotations

from typing import Any

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
TRAINJOB = "TrainJob"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET = "JobSet"

# spec.managedBy: the value this controller serves (the CRD's default); any other (MultiKueue's
# "kueue.x-k8s.io/multikueue") leaves the TrainJob to that controller.
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
# The field manager upstream's server-side applies use (client.FieldOwner("trainer")).
FIELD_MANAGER = "trainer"

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
LAUNCHER = "launcher"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
TRAINER_PORT = 29500
STORAGE_URI = "STORAGE_URI"
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

# Condition types and reasons of a TrainJob (metav1.Condition).
SUSPENDED = "Suspended"
COMPLETE = "Complete"
FAILED = "Failed"
REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
REASON_RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
MESSAGE_SUSPENDED = "TrainJob is suspended"
MESSAGE_RESUMED = "TrainJob is resumed"
MESSAGE_DEADLINE_EXCEEDED = "TrainJob exceeded its active deadline"
# Upstream's Warning event when the objects could not be built (it then retries with backoff).
REASON_RESOURCES_FAILED = "TrainJobResourcesCreationFailed"
# Ours: upstream has no condition for these (it retries the error forever); see plan.py.
REASON_RUNTIME_NOT_FOUND = "TrainingRuntimeNotFound"

# JobSet condition types the TrainJob's Complete and Failed are copied from.
JOBSET_COMPLETED = "Completed"
JOBSET_FAILED = "Failed"
TRUE, FALSE = "True", "False"


def spec(trainjob: dict[str, Any]) -> dict[str, Any]:
    return trainjob.get("spec") or {}


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def trainer(trainjob: dict[str, Any]) -> dict[str, Any] | None:
    """``spec.trainer``, or None: several rules apply only when the TrainJob has one."""
    value = spec(trainjob).get("trainer")
    return value if isinstance(value, dict) else None


def runtime_ref(trainjob: dict[str, Any]) -> tuple[str, str, str]:
    """(apiGroup, kind, name) of ``spec.runtimeRef`` with the CRD's defaults."""
    ref = spec(trainjob).get("runtimeRef") or {}
    group = ref.get("apiGroup", GROUP)
    kind = ref.get("kind", CLUSTER_TRAINING_RUNTIME)
    return (group or "", kind or "", ref.get("name") or "")


def group_kind(group: str, kind: str) -> str:
    """``schema.GroupKind.String()``: ``Kind.group``, or ``Kind`` without a group."""
    return f"{kind}.{group}" if group else kind


def suspended(trainjob: dict[str, Any]) -> bool:
    return spec(trainjob).get("suspend") is True


def managed_here(trainjob: dict[str, Any]) -> bool:
    """``!IsManagedByExternalController``: no ``managedBy``, or this controller's value."""
    return (spec(trainjob).get("managedBy") or TRAINJOB_CONTROLLER) == TRAINJOB_CONTROLLER


def owner_reference(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The controller reference every object upstream builds carries."""
    m = meta(trainjob)
    return {
        "apiVersion": API_VERSION,
        "kind": TRAINJOB,
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_metadata(trainjob: dict[str, Any], name: str) -> dict[str, Any]:
    m = meta(trainjob)
    return {"name": name, "namespace": m.get("namespace", ""), "ownerReferences": [owner_reference(trainjob)]}


def ml_policy(runtime: dict[str, Any]) -> dict[str, Any] | None:
    value = (runtime.get("spec") or {}).get("mlPolicy")
    return value if isinstance(value, dict) else None


def mpi_policy(runtime: dict[str, Any]) -> dict[str, Any] | None:
    """``mlPolicy.mpi`` with the CRD's defaults, or None."""
    policy = (ml_policy(runtime) or {}).get("mpi")
    if not isinstance(policy, dict):
        return None
    return {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
        **policy,
    }


def pod_group_policy(runtime: dict[str, Any]) -> dict[str, Any]:
    value = (runtime.get("spec") or {}).get("podGroupPolicy")
    return value if isinstance(value, dict) else {}


def condition(conditions: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == ctype), None)


def is_true(conditions: list[dict[str, Any]], ctype: str) -> bool:
    c = condition(conditions, ctype)
    return c is not None and c.get("status") == TRUE


def finished(conditions: list[dict[str, Any]]) -> bool:
    """``IsTrainJobFinished``: Complete or Failed is True."""
    return is_true(conditions, COMPLETE) or is_true(conditions, FAILED)
