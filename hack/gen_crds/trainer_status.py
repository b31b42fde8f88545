"""A TrainJob's status as Trainer v2.3 writes it: metav1.Conditions, the JobSet's per-job counts
(which Kueue reads), and the alpha trainerStatus (progress and metrics)."""

from __future__ import annotations

from .runtime_patch import keyed_list
from .schema import Schema, integer, obj, rule, string, timestamp

# metav1.Condition's own validation (its kubebuilder markers, which controller-gen copies).
CONDITION_TYPE = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def condition() -> Schema:
    return obj(
        "One observed state (metav1.Condition).",
        {
            "type": string(
                "Suspended, Complete or Failed. The State column shows the last one.",
                maxLength=316,
                pattern=CONDITION_TYPE,
            ),
            "status": string("Whether the condition holds.", enum=["True", "False", "Unknown"]),
            "observedGeneration": integer(
                "The metadata.generation the condition was set for.", fmt="int64", minimum=0
            ),
            "lastTransitionTime": timestamp("When status last changed."),
            "reason": string(
                "Machine-readable cause in CamelCase (e.g. Resumed, DeadlineExceeded, the JobSet's reasons).",
                maxLength=1024,
                minLength=1,
                pattern=CONDITION_REASON,
            ),
            "message": string("Human-readable details.", maxLength=32768),
        },
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )


def _count(what: str) -> Schema:
    return integer(f"Number of the replicated job's Jobs {what}.", minimum=0)


def job_status() -> Schema:
    return obj(
        "Jobs of one replicated job of the TrainJob's JobSet.",
        {
            "name": string("The replicated job.", minLength=1, maxLength=253),
            "ready": _count("whose pods are all ready or completed"),
            "succeeded": _count("that succeeded"),
            "failed": _count("that failed"),
            "active": _count("with a running or pending pod not being deleted"),
            "suspended": _count("that are suspended"),
        },
        required=["active", "failed", "name", "ready", "succeeded", "suspended"],
    )


def trainer_status() -> Schema:
    metric = obj(
        "One metric.",
        {
            "name": string("What is measured (loss, eval_accuracy, ...).", minLength=1, maxLength=64),
            "value": string("The value, as a string.", minLength=1, maxLength=64),
        },
        required=["name", "value"],
    )
    return obj(
        "Progress reported by the trainer (alpha, upstream's TrainJobStatus feature gate; not written "
        "by this operator).",
        {
            "progressPercentage": integer("Estimated progress, 0 to 100.", minimum=0, maximum=100),
            "estimatedRemainingSeconds": integer("Estimated seconds left.", minimum=0),
            "metrics": {
                "description": "The model's current metrics.",
                "type": "array",
                "items": metric,
                "maxItems": 256,
                "x-kubernetes-list-type": "atomic",
            },
            "lastUpdatedTime": timestamp("When the progress was observed."),
        },
        rules=[
            rule(
                "has(self.lastUpdatedTime)",
                "status.trainerStatus needs lastUpdatedTime: set it to when the progress was observed",
            )
        ],
    )


def trainjob_status() -> Schema:
    out = obj(
        "Observed state of the TrainJob, written by the operator.",
        {
            "conditions": keyed_list(
                "The TrainJob's conditions, one per type; the last one is the current state (the State "
                "column). No condition: created or running.",
                condition(),
                8,
                key="type",
            ),
            "jobsStatus": keyed_list("The JobSet's Jobs per replicated job.", job_status(), 100),
            "trainerStatus": trainer_status(),
        },
    )
    out["minProperties"] = 1
    return out
