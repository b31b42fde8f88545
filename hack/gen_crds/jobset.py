"""A JobSet's spec (``jobset.x-k8s.io/v1alpha2`` JobSetSpec, JobSet v0.12.0): the template of
Trainer v2's runtimes. Its Job templates are batch/v1 JobTemplateSpecs from the pinned
Kubernetes (gen_crds.podtemplate), without their text, as the v1 kinds' pod templates.
"""

from __future__ import annotations

from .podtemplate import api_schema
from .schema import Schema, boolean, integer, obj, rule, string

IMMUTABLE_IN_A_JOBSET = "is immutable in a JobSet: create a new runtime (or JobSet) instead"


def _immutable(field: str) -> list[dict]:
    # JobSet's own markers: the rule holds for a runtime's template too, as in Trainer's CRDs.
    return [rule("self == oldSelf", f"{field} {IMMUTABLE_IN_A_JOBSET}")]


def _names(description: str) -> Schema:
    return {
        "description": description,
        "type": "array",
        "items": {"type": "string", "description": "A replicated job's name."},
        "x-kubernetes-list-type": "atomic",
    }


def job_template() -> Schema:
    template = api_schema("io.k8s.api.batch.v1.JobTemplateSpec")
    template["description"] = (
        "The Job template (batch/v1 JobTemplateSpec) of every Job of this replicated job. Its "
        "labels mark the step the TrainJob fills in (trainer.kubeflow.org/trainjob-ancestor-step)."
    )
    template["properties"]["metadata"]["description"] = "Labels and annotations copied onto every Job."
    template["properties"]["spec"]["description"] = "The Job spec (batch/v1 JobSpec); template is required."
    return template


def depends_on() -> Schema:
    item = obj(
        "A replicated job this one waits for.",
        {
            "name": string("The replicated job waited for."),
            "status": string(
                "What it must reach: Ready (all its Jobs ready, succeeded or failed) or Complete "
                "(all succeeded).",
                enum=["Ready", "Complete"],
            ),
        },
        required=["name", "status"],
    )
    return {
        "description": "Replicated jobs this one starts after (one today; not on the first). Exclusive "
        "with startupPolicy InOrder.",
        "type": "array",
        "items": item,
        "maxItems": 5,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-validations": _immutable("dependsOn"),
    }


def replicated_job() -> Schema:
    return obj(
        "A group of identical Jobs, named <jobset>-<name>-<index>.",
        {
            "name": string("Name of the replicated job, the middle of its Jobs' names."),
            "groupName": string("Group the replicated job belongs to.", default="default"),
            "template": job_template(),
            "replicas": integer("Number of Jobs made from the template.", default=1),
            "dependsOn": depends_on(),
        },
        required=["name", "template"],
    )


def network() -> Schema:
    return obj(
        "The JobSet's headless Service and the pods' host names.",
        {
            "enableDNSHostnames": boolean(
                "Pods are reachable at <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>."
            ),
            "subdomain": string("The headless Service's name. Defaults to the JobSet's name."),
            "publishNotReadyAddresses": boolean(
                "Publish pods' DNS records before they are ready. Defaults to true."
            ),
        },
        rules=_immutable("network"),
    )


def success_policy() -> Schema:
    return obj(
        "When the JobSet has succeeded. Without it: when every Job has.",
        {
            "operator": string(
                "All: every Job of the target replicated jobs must succeed; Any: one.", enum=["All", "Any"]
            ),
            "targetReplicatedJobs": _names("The replicated jobs counted; empty: all."),
        },
        required=["operator"],
        rules=_immutable("successPolicy"),
    )


FAILURE_ACTIONS = [
    "FailJobSet",
    "RestartJobSet",
    "RestartJobSetAndIgnoreMaxRestarts",
    "RestartJob",
    "RestartJobAndIgnoreMaxRestarts",
]


def failure_rule() -> Schema:
    reasons = {
        "description": "Job failure reasons the rule matches (any of them); empty: every reason.",
        "type": "array",
        "items": {"type": "string", "description": "A Job failure reason (e.g. BackoffLimitExceeded)."},
    }
    patterns = {
        "description": "Regular expressions (RE2) of Job failure messages the rule matches; empty: every message.",
        "type": "array",
        "items": {"type": "string", "description": "An RE2 regular expression."},
    }
    return obj(
        "What to do when a Job fails with a matching reason and message; the first matching rule acts.",
        {
            "name": string("Name of the rule (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$)."),
            "action": string("What the JobSet controller does.", enum=FAILURE_ACTIONS),
            "onJobFailureReasons": reasons,
            "onJobFailureMessagePatterns": patterns,
            "targetReplicatedJobs": _names("The replicated jobs the rule applies to; empty: all."),
        },
        required=["action", "name"],
    )


def failure_policy() -> Schema:
    return obj(
        "When a failed Job restarts the JobSet and when it fails it. Without it: the first failed Job "
        "fails the JobSet.",
        {
            "maxRestarts": integer("Restarts of the whole JobSet before it fails."),
            "restartStrategy": string(
                "Recreate: each Job is recreated once its old one is gone; BlockingRecreate: after all "
                "old Jobs are gone; InPlaceRestart: healthy pods restart in place.",
                enum=["Recreate", "BlockingRecreate", "InPlaceRestart"],
                default="Recreate",
            ),
            "rules": {
                "description": "Rules tried in order; no match: RestartJobSet.",
                "type": "array",
                "items": failure_rule(),
            },
        },
        rules=_immutable("failurePolicy"),
    )


def coordinator() -> Schema:
    return obj(
        "The coordinator pod, whose stable address every Job and pod gets in the "
        "jobset.sigs.k8s.io/coordinator label and annotation.",
        {
            "replicatedJob": string("The replicated job of the coordinator pod."),
            "jobIndex": {"description": "Index of the coordinator's Job.", "type": "integer"},
            "podIndex": {"description": "Completion index of the coordinator pod.", "type": "integer"},
        },
        required=["replicatedJob"],
    )


def volume_claim_policy() -> Schema:
    claim = api_schema("io.k8s.api.core.v1.PersistentVolumeClaim")
    claim["description"] = "A PersistentVolumeClaim, created once as <claim>-<jobset> and mounted by name."
    return obj(
        "Shared PersistentVolumeClaims the JobSet creates for its Jobs' pods.",
        {
            "templates": {
                "description": "The claims; each must be mounted (by name) by a container of a template.",
                "type": "array",
                "items": claim,
                "maxItems": 50,
                "x-kubernetes-list-type": "atomic",
            },
            "retentionPolicy": obj(
                "What happens to the claims.",
                {
                    "whenDeleted": string(
                        "When the JobSet is deleted: Delete or Retain the claims.",
                        enum=["Delete", "Retain"],
                        default="Delete",
                    )
                },
            ),
        },
        rules=[
            rule(
                "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
                "volumeClaimPolicies templates cannot set metadata.namespace: the claims are created in "
                "the JobSet's namespace; remove it",
            )
        ],
    )


def jobset_spec(description: str) -> Schema:
    return obj(
        description,
        {
            "replicatedJobs": {
                "description": "The groups of Jobs that form the set, by name.",
                "type": "array",
                "items": replicated_job(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "network": network(),
            "successPolicy": success_policy(),
            "failurePolicy": failure_policy(),
            "startupPolicy": obj(
                "Deprecated (use dependsOn): the order the replicated jobs start in.",
                {
                    "startupPolicyOrder": string(
                        "AnyOrder, or InOrder: each after the previous one's Jobs are ready.",
                        enum=["AnyOrder", "InOrder"],
                    )
                },
                required=["startupPolicyOrder"],
                rules=_immutable("startupPolicy"),
            ),
            "suspend": boolean("Suspend every Job of the set."),
            "coordinator": coordinator(),
            "managedBy": string("The controller of the JobSet; unset: JobSet's own."),
            "ttlSecondsAfterFinished": integer(
                "Delete the finished JobSet after this many seconds.", minimum=0
            ),
            "volumeClaimPolicies": {
                "description": "Shared volume claims of the Jobs' pods.",
                "type": "array",
                "items": volume_claim_policy(),
                "maxItems": 50,
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-validations": _immutable("volumeClaimPolicies"),
            },
        },
        rules=[
            rule(
                "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
                "self.replicatedJobs.exists(x, has(x.dependsOn)))",
                "startupPolicy InOrder and dependsOn are mutually exclusive: use dependsOn alone",
            )
        ],
    )
