"""A TrainJob's ``runtimePatches``: what a user or a controller (Kueue) may change in the runtime's
JobSet template for one TrainJob, keyed by who owns the entry (Trainer v2.3's RuntimePatch)."""

from __future__ import annotations

from .podtemplate import EMBEDDED_OBJECT_META, api_schema, keyed
from .schema import Schema, described, integer, obj, rule, string, timestamp

MAX_PATCHES = 16


def immutable(field: str) -> list[dict]:
    return [
        rule(
            "self == oldSelf",
            f"{field} in a runtime patch is immutable: remove the patch and add a new one, or recreate "
            "the TrainJob",
        )
    ]


def keyed_list(
    description: str, item: Schema, max_items: int, key: str = "name", rules: list[dict] | None = None
) -> Schema:
    """A list-map of ``item`` by ``key`` with at most ``max_items`` entries."""
    out: Schema = {
        "description": description,
        "type": "array",
        "items": item,
        "maxItems": max_items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
    }
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def api_list(description: str, name: str, max_items: int, rules: list[dict] | None = None) -> Schema:
    """A list-map by name of a Kubernetes API type (core/v1 EnvVar, Volume, ...)."""
    return keyed_list(description, keyed(api_schema(name), ["name"]), max_items, rules=rules)


def metadata(what: str) -> Schema:
    out: Schema = dict(EMBEDDED_OBJECT_META)
    out["description"] = f"Labels and annotations added to the {what}."
    return out


def container_patch() -> Schema:
    return obj(
        "Additions to one container of the runtime's template, by name.",
        {
            "name": string("The container; the runtime's job must have it.", minLength=1, maxLength=253),
            "env": api_list(
                "Environment variables added to the container; not for node, dataset-initializer and "
                "model-initializer, whose variables come from spec.trainer and spec.initializer.",
                "io.k8s.api.core.v1.EnvVar",
                128,
            ),
            "volumeMounts": api_list(
                "Volume mounts added to the container.", "io.k8s.api.core.v1.VolumeMount", 128
            ),
            "securityContext": described(
                "The container's security context.", api_schema("io.k8s.api.core.v1.SecurityContext")
            ),
        },
        required=["name"],
    )


def containers(which: str) -> Schema:
    return keyed_list(
        f"Patches of the runtime's {which}, by name.",
        container_patch(),
        64,
        rules=immutable(which),
    )


def _scheduling(spec: dict[str, Schema]) -> None:
    """The fields Kueue writes on admission (placement), mutable while the TrainJob is suspended."""
    spec["nodeSelector"] = {
        "description": "Node labels added to the pods' nodeSelector.",
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
    spec["affinity"] = described("The pods' affinity.", api_schema("io.k8s.api.core.v1.Affinity"))
    spec["tolerations"] = {
        "description": "Tolerations added to the pods.",
        "type": "array",
        "items": api_schema("io.k8s.api.core.v1.Toleration"),
        "maxItems": 128,
        "x-kubernetes-list-type": "atomic",
    }
    spec["schedulingGates"] = api_list(
        "Scheduling gates added to the pods.", "io.k8s.api.core.v1.PodSchedulingGate", 16
    )


def pod_spec_patch() -> Schema:
    spec: dict[str, Schema] = {
        "serviceAccountName": string(
            "The pods' ServiceAccount.", maxLength=253, rules=immutable("serviceAccountName")
        ),
        "volumes": api_list(
            "Volumes added to the pods.", "io.k8s.api.core.v1.Volume", 128, immutable("volumes")
        ),
        "initContainers": containers("initContainers"),
        "containers": containers("containers"),
        "imagePullSecrets": api_list(
            "Image pull secrets added to the pods.",
            "io.k8s.api.core.v1.LocalObjectReference",
            64,
            immutable("imagePullSecrets"),
        ),
        "securityContext": described(
            "The pods' security context.",
            api_schema("io.k8s.api.core.v1.PodSecurityContext"),
            **{"x-kubernetes-validations": immutable("securityContext")},
        ),
    }
    _scheduling(spec)
    spec["terminationGracePeriodSeconds"] = integer(
        "The pods' termination grace period.",
        fmt="int64",
        minimum=0,
        **{"x-kubernetes-validations": immutable("terminationGracePeriodSeconds")},
    )
    return obj("The pod spec fields a patch may set.", spec)


def replicated_job_patch() -> Schema:
    pod = obj(
        "Patch of the Job's pod template.",
        {"metadata": metadata("pods"), "spec": pod_spec_patch()},
    )
    job = obj(
        "Patch of the replicated job's Job template.",
        {"metadata": metadata("Jobs"), "spec": obj("Patch of the Job spec.", {"template": pod})},
    )
    return obj(
        "Patch of one replicated job of the runtime's JobSet template, by name.",
        {
            "name": string("The replicated job; the runtime must have it.", minLength=1, maxLength=253),
            "template": job,
        },
        required=["name"],
    )


def runtime_patch() -> Schema:
    jobset = obj(
        "Patch of the JobSet template.",
        {
            "metadata": metadata("JobSet"),
            "spec": obj(
                "Patch of the JobSet spec.",
                {
                    "replicatedJobs": keyed_list(
                        "Patches of replicated jobs, by name.", replicated_job_patch(), 100
                    )
                },
            ),
        },
    )
    return obj(
        "Changes to the runtime's template for this TrainJob, owned by one manager.",
        {
            "manager": string(
                "Who owns this entry, a domain-prefixed path (Kueue: kueue.x-k8s.io/manager).",
                minLength=1,
                maxLength=253,
                rules=[
                    rule(
                        "self == oldSelf",
                        "runtimePatches[].manager is immutable: remove the entry and add a new one",
                    )
                ],
            ),
            "time": timestamp("When the entry was last written (informational)."),
            "trainingRuntimeSpec": obj(
                "Patch of a TrainingRuntime's or ClusterTrainingRuntime's spec.", {"template": jobset}
            ),
        },
        required=["manager"],
    )


def runtime_patches() -> Schema:
    return keyed_list(
        "Changes to the runtime's JobSet template for this TrainJob, one entry per manager (a user, "
        "Kueue); applied in order. Changed only while the TrainJob is suspended (before or after "
        "the change).",
        runtime_patch(),
        MAX_PATCHES,
        key="manager",
    )
