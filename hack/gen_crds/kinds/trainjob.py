"""Kubeflow Trainer v2.3's TrainJob (``trainer.kubeflow.org/v1alpha1``): a training job whose shape
comes from a TrainingRuntime or ClusterTrainingRuntime."""

from __future__ import annotations

from ..common import dns1035_rule
from ..kind import AGE_COLUMN, STATE_COLUMN, Kind
from ..podtemplate import api_schema
from ..runtime_patch import api_list, runtime_patches
from ..schema import Schema, boolean, described, integer, obj, rule, string
from ..trainer_admission import trainjob_policies
from ..trainer_status import trainjob_status

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
MANAGED_BY = ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"]
STORAGE_URI = "^[A-Za-z][A-Za-z0-9+.-]*://.+$"


def immutable(field: str, why: str = "recreate the TrainJob to change it") -> list[dict]:
    return [rule("self == oldSelf", f"spec.{field} is immutable: {why}")]


def runtime_ref() -> Schema:
    return obj(
        "The runtime the TrainJob is made from. Cannot be changed.",
        {
            "name": string(
                "Name of the runtime; a TrainingRuntime must be in the TrainJob's namespace.",
                minLength=1,
                maxLength=253,
            ),
            "apiGroup": string("API group of the runtime.", default=GROUP, maxLength=253),
            "kind": string(
                "ClusterTrainingRuntime (any namespace may use it) or TrainingRuntime (its namespace's).",
                default="ClusterTrainingRuntime",
                maxLength=253,
            ),
        },
        required=["name"],
        rules=immutable("runtimeRef", "recreate the TrainJob to use another runtime"),
    )


def env(where: str) -> Schema:
    return api_list(
        f"Environment variables of the {where} container, merged over the runtime's.",
        "io.k8s.api.core.v1.EnvVar",
        128,
    )


def initializer_step(what: str, step: str) -> Schema:
    secret = api_schema("io.k8s.api.core.v1.LocalObjectReference")
    return obj(
        f"Where the {what} comes from; fills in the runtime's {step} job.",
        {
            "storageUri": string(
                f"URI of the {what} (hf://, s3://, ...), STORAGE_URI of the {step} container; may be empty.",
                maxLength=2048,
                rules=[
                    rule(
                        f"self == '' || self.matches('{STORAGE_URI}')",
                        "storageUri must be empty or a URI: write scheme://location (e.g. hf://org/name)",
                    )
                ],
            ),
            "env": env(step),
            "secretRef": described(
                f"A Secret in the TrainJob's namespace with credentials for the {what}.", secret
            ),
        },
    )


def initializer() -> Schema:
    return obj(
        "Dataset and pre-trained model downloaded before training. Cannot be changed.",
        {
            "dataset": initializer_step("dataset", "dataset-initializer"),
            "model": initializer_step("pre-trained model", "model-initializer"),
        },
        rules=immutable("initializer"),
    )


def trainer() -> Schema:
    args = {"type": "string", "maxLength": 1048576, "description": "One argument."}
    return obj(
        "What the trainer (the node container of the runtime's trainer job) runs. Cannot be changed.",
        {
            "image": string("Image of the node container.", maxLength=500),
            "command": {
                "description": "Entrypoint of the node container.",
                "type": "array",
                "items": args,
                "maxItems": 128,
                "x-kubernetes-list-type": "atomic",
            },
            "args": {
                "description": "Arguments of the entrypoint.",
                "type": "array",
                "items": dict(args),
                "maxItems": 128,
                "x-kubernetes-list-type": "atomic",
            },
            "env": env("node"),
            "numNodes": integer(
                "Number of training nodes (pods of the trainer job); the runtime's by default."
            ),
            "resourcesPerNode": described(
                "Resources of each node container, merged over the runtime's.",
                api_schema("io.k8s.api.core.v1.ResourceRequirements"),
            ),
            "numProcPerNode": integer(
                "Processes per node: torch's PET_NPROC_PER_NODE (auto by default), MPI's slots per node."
            ),
        },
        rules=immutable("trainer"),
    )


def managed_by() -> Schema:
    return string(
        "Who reconciles the TrainJob: trainer.kubeflow.org/trainjob-controller (this operator) or "
        "kueue.x-k8s.io/multikueue (Kueue's MultiKueue runs it in a worker cluster; this operator leaves "
        "it alone). Cannot be changed.",
        default=MANAGED_BY[0],
        maxLength=253,
        rules=[
            rule(
                f"self in {MANAGED_BY}",
                f"spec.managedBy must be {MANAGED_BY[0]} or {MANAGED_BY[1]}: set one of them or leave it out",
            ),
            *immutable("managedBy"),
        ],
    )


def trainjob_spec() -> Schema:
    return obj(
        "Desired state of the TrainJob.",
        {
            "runtimeRef": runtime_ref(),
            "initializer": initializer(),
            "trainer": trainer(),
            "runtimePatches": runtime_patches(),
            "suspend": boolean(
                "true: the TrainJob's JobSet is suspended (its pods deleted) until set back to false.",
                default=False,
            ),
            "activeDeadlineSeconds": integer(
                "Fail the TrainJob (reason DeadlineExceeded) when it has run this long since it started "
                "or last resumed. Cannot be changed.",
                fmt="int64",
                minimum=1,
                **{"x-kubernetes-validations": immutable("activeDeadlineSeconds")},
            ),
            "managedBy": managed_by(),
        },
        required=["runtimeRef"],
    )


def trainjob() -> Kind:
    return Kind(
        group=GROUP,
        version=VERSION,
        kind="TrainJob",
        plural="trainjobs",
        short_names=[],
        description="A Kubeflow Trainer v2 training job (Trainer v2.3 compatible): a JobSet made from a "
        "TrainingRuntime or ClusterTrainingRuntime and the TrainJob's trainer, initializer and patches.",
        spec=trainjob_spec(),
        status=trainjob_status(),
        root_rules=[dns1035_rule()],
        columns=[STATE_COLUMN, AGE_COLUMN],
        policy=trainjob_policies,
        spec_required=False,
    )
