"""What every kind shares: replica specs and their pod template, the run policy, the status, and
the job-name rules."""

from __future__ import annotations

from typing import Any

from .podtemplate import pod_template_spec
from .schema import Schema, boolean, integer, obj, quantity_map, rule, string, timestamp

# Pod and service names are DNS-1123 labels.
MAX_LABEL = 63
RESTART_POLICIES = ["Always", "OnFailure", "Never", "ExitCode"]
MANAGED_BY = ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]


def pod_template(owner: str) -> Schema:
    """core/v1 PodTemplateSpec in full (gen_crds.podtemplate): the API server prunes unknown template
    fields and kubectl refuses them, as with training-operator's CRDs."""
    template = pod_template_spec()
    template["description"] = (
        f"Pod template (core/v1 PodTemplateSpec) of every {owner} pod. restartPolicy in the template is "
        "replaced by the replica spec's restartPolicy."
    )
    template["properties"]["metadata"]["description"] = "Labels and annotations copied onto every pod."
    template["properties"]["spec"]["description"] = "The pod spec (core/v1 PodSpec); containers is required."
    return template


def restart_policy(default: str | None, default_note: str) -> Schema:
    extra: Schema = {"enum": RESTART_POLICIES}
    if default:
        extra["default"] = default
    return string(
        "What happens when a pod of this replica type fails. Always and OnFailure: the container is "
        "restarted in place and a pod that still reaches Failed is recreated. Never: the failure counts "
        "against the job. ExitCode: exit codes 1-127 are permanent failures, 128-255 (e.g. SIGKILL) "
        f"recreate the pod. {default_note}",
        **extra,
    )


def replica_spec(
    owner: str,
    restart_default: str | None,
    restart_note: str,
    replicas_required: bool = False,
    extra_properties: dict[str, Schema] | None = None,
    rules: list[dict[str, Any]] | None = None,
    replicas_default: str = " Defaults to 1.",
) -> Schema:
    """The one replica spec: replicas, restartPolicy and the pod template. ``replicas_default``
    describes the default; unless it is upstream's 1, the operator applies it, not the schema."""
    replicas = integer(
        "Number of pods of this replica type; pods are named <job>-<type>-<index>."
        + ("" if replicas_required else replicas_default),
        minimum=0,
    )
    if not replicas_required and replicas_default == " Defaults to 1.":
        replicas["default"] = 1
    props: dict[str, Schema] = {"replicas": replicas}
    props.update(extra_properties or {})
    props["restartPolicy"] = restart_policy(restart_default, restart_note)
    props["template"] = pod_template(owner)
    out = obj(
        f"Replicas of one {owner} replica type and the pod template they run.",
        props,
        required=(["replicas", "template"] if replicas_required else ["template"]),
    )
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def scheduling_policy(description: str) -> Schema:
    return obj(
        description,
        {
            "minAvailable": integer(
                "Gang size: pods that must be schedulable together before any starts. "
                "Defaults to the sum of all replicas.",
                minimum=0,
            ),
            "queue": string(
                "Queue of the gang scheduler (Volcano). Cannot be changed once set.",
                maxLength=253,
                rules=[
                    rule(
                        "self == oldSelf",
                        "spec.runPolicy.schedulingPolicy.queue is immutable: recreate the job to use "
                        "another queue",
                    )
                ],
            ),
            "minResources": quantity_map(
                "Resources the whole gang needs before it is admitted. Defaults to the sum of the "
                "requests of the first minAvailable pods."
            ),
            "priorityClass": string("PriorityClass of the gang's PodGroup.", maxLength=253),
            "scheduleTimeoutSeconds": integer(
                "How long the coscheduling plugin waits for the whole gang (scheduler-plugins only).",
                minimum=0,
            ),
        },
    )


def run_policy() -> Schema:
    """training-operator's RunPolicy, shared by every kind."""
    return obj(
        "Runtime policies shared by all job kinds: cleanup, deadlines, retries, suspension and gang "
        "scheduling (training-operator's RunPolicy).",
        {
            "cleanPodPolicy": string(
                "Which pods to delete once the job has finished: None keeps all, Running deletes those "
                "still running or pending, All deletes every pod. Unset means None.",
                enum=["None", "Running", "All"],
            ),
            "ttlSecondsAfterFinished": integer(
                "Delete the job (and with it its pods) this many seconds after it finished. "
                "Unset means never.",
                minimum=0,
            ),
            "activeDeadlineSeconds": integer(
                "Fail the job when it has been running longer than this many seconds since its startTime.",
                fmt="int64",
                minimum=0,
            ),
            "backoffLimit": integer(
                "Fail the job when its pods have restarted more than this many times.", minimum=0
            ),
            "suspend": boolean(
                "true: delete the job's pods and create none until it is set back to false. Resuming "
                "restarts the job (startTime is reset).",
                default=False,
            ),
            "schedulingPolicy": scheduling_policy("Gang-scheduling settings (PodGroup) of the job."),
            "managedBy": string(
                "The controller that reconciles the job. Unset or kubeflow.org/training-operator: this "
                "operator; kueue.x-k8s.io/multikueue: Kueue's MultiKueue dispatches it to a worker "
                "cluster and this operator leaves it alone. Cannot be changed after creation.",
                enum=MANAGED_BY,
            ),
        },
    )


RUN_POLICY_RULES = [
    # On spec, not on the field: a field-level rule cannot see the field being added or removed.
    rule(
        "(has(self.runPolicy) && has(self.runPolicy.managedBy) ? self.runPolicy.managedBy : '') == "
        "(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.managedBy) ? oldSelf.runPolicy.managedBy : '')",
        "spec.runPolicy.managedBy is immutable: it cannot be set, changed or removed after the job is "
        "created; recreate the job instead",
    )
]


CONDITION = obj(
    "One observed state of the job. The last entry is the current state.",
    {
        "type": string("Created, Running, Restarting, Succeeded, Suspended or Failed."),
        "status": string("Whether the condition holds.", enum=["True", "False", "Unknown"]),
        "reason": string("Machine-readable cause, <Kind><Type> (e.g. TFJobRunning)."),
        "message": string("Human-readable details."),
        "lastUpdateTime": timestamp("When the condition was last written."),
        "lastTransitionTime": timestamp("When status last changed."),
    },
    required=["type", "status"],
)

REPLICA_STATUS = obj(
    "Pods of one replica type by phase.",
    {
        "active": integer("Pods in phase Running."),
        "succeeded": integer("Pods in phase Succeeded."),
        "failed": integer("Pods in phase Failed."),
        "selector": string("Label selector (in string form) of this replica type's pods."),
    },
)


def job_status(kind: str, extra: dict[str, Schema] | None = None) -> Schema:
    """Status as Kubeflow's tools read it; written by the operator only."""
    props: dict[str, Schema] = {
        "conditions": {
            "description": f"Condition history of the {kind}, oldest first; the last entry is the current "
            "state (the State column).",
            "type": "array",
            "items": CONDITION,
        },
        "replicaStatuses": {
            "description": "Pod counts per replica type, keyed by replica type.",
            "type": "object",
            "additionalProperties": REPLICA_STATUS,
        },
        "restartCount": integer(
            "Pod restarts counted against spec.runPolicy.backoffLimit, including those of pods that were "
            "replaced."
        ),
        "evictionCount": integer(
            "Pods evicted or disrupted and recreated; counted against spec.runPolicy.backoffLimit (6 when unset)."
        ),
        "countedPods": {
            "description": "UIDs of failed or evicted pods already counted in restartCount or evictionCount, "
            "so a stale read never counts one twice; kept by the operator while those pods exist.",
            "type": "array",
            "maxItems": 10000,
            "items": {"type": "string", "maxLength": 64, "description": "A pod UID."},
        },
        "startTime": timestamp(
            "When the job's pods could first start: after gang admission, reset when a suspended job resumes."
        ),
        "completionTime": timestamp("When the job succeeded or failed."),
        "lastReconcileTime": timestamp("When the operator last held the job back (gang scheduling)."),
        "podGroupPendingMessage": {
            "description": "Why the operator holds the job's pods back (gang scheduling: the PodGroup "
            "not yet admitted by Volcano, what the gang needs); the message of the last PodGroupPending "
            "event. Removed once the pods may be created.",
            "type": "string",
            "maxLength": 4096,
        },
        "reportedPodProblems": {
            "description": "Pod problems already reported as events on the job (pod uid/container/"
            "reason), so each is reported once; kept by the operator.",
            "type": "array",
            "maxItems": 1000,
            "items": {"type": "string", "maxLength": 512, "description": "One reported problem."},
        },
    }
    props.update(extra or {})
    return obj(f"Observed state of the {kind}, written by the operator.", props)


def dns1035_rule() -> dict[str, Any]:
    return rule(
        "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name must be a DNS-1035 label: at most 63 lower-case letters, digits or '-', starting "
        "with a letter and ending with a letter or digit; rename the job",
    )


def _name_length_message(label: str, replicas: str, length: str) -> str:
    # format() rather than '+' with string(int): the cost estimator treats string(int) as
    # unbounded, which puts any concatenation with it far over the CRD's CEL budget.
    return (
        f"\"metadata.name is too long: pod and service name '%s-%s-%d' would have %d characters (limit "
        f'{MAX_LABEL}); shorten metadata.name by %d characters".format([self.metadata.name, {label}, '
        f"{replicas} - 1, {length}, {length} - {MAX_LABEL}])"
    )


NAME_LENGTH_MESSAGE = (
    f"metadata.name is too long: every pod and service name <job>-<type>-<index> must fit in {MAX_LABEL} "
    "characters; shorten metadata.name"
)


def map_name_length_rule(path: str) -> dict[str, Any]:
    """Every ``<job>-<lower type>-<index>`` (index up to replicas-1) of a replica spec map is a DNS label.
    Replicas left out count as none: only MPIJob has no schema default, and the operator's are 0
    (Worker) or a launcher without an index."""
    n = f"(has({path}[k].replicas) ? {path}[k].replicas : 0)"
    length = f"self.metadata.name.size() + k.size() + 2 + string({n} - 1).size()"
    too_long = f"{n} > 0 && {length} > {MAX_LABEL}"
    return rule(
        f"!{path}.exists(k, {too_long})",
        NAME_LENGTH_MESSAGE,
        f"{path}.filter(k, {too_long}).map(k, {_name_length_message('k.lowerAscii()', n, length)})[0]",
    )


def field_name_length_rule(label: str, path: str) -> dict[str, Any]:
    """The same for a replica type that is a field of the spec (PaddleJob roles, Caffe2 workers)."""
    n = f"{path}.replicas"
    length = f"self.metadata.name.size() + {len(label) + 2} + string({n} - 1).size()"
    guard = "" if path == "self.spec.replicaSpecs" else f"!has({path}) || "
    return rule(
        f"{guard}{n} < 1 || {length} <= {MAX_LABEL}",
        NAME_LENGTH_MESSAGE,
        _name_length_message(f"'{label}'", n, length),
    )


def _cel_list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


class ReplicaKeys:
    """How the keys of a replica-spec map name the kind's replica types, as CEL.

    ``folded`` types are matched in any ASCII case: upstream admits such a key and its defaulter
    camel-cases it in memory (training-operator's ``setTypeNameToCamelCase``, ``strings.EqualFold``),
    so a stored job may spell ``Worker`` as ``worker``. The other types must be spelled exactly,
    because upstream refuses any other spelling before its defaulter could rename it.
    ``strings.EqualFold`` also folds the Kelvin sign into k and the long s into s; those two
    spellings are left out (refused, and unknown to the engine) rather than paying for a
    Unicode fold in every rule.
    """

    def __init__(self, types: list[str], folded: list[str] | None = None) -> None:
        self.types = list(types)
        self.folded = [t for t in types if t in (folded or [])]

    def names(self, key: str, types: list[str]) -> str:
        """CEL: the CEL string ``key`` (a map key) names one of ``types``."""
        exact = [t for t in types if t not in self.folded]
        lower = [t.lower() for t in types if t in self.folded]
        parts = [f"{key} in {_cel_list(exact)}"] if exact else []
        if lower:
            parts.append(f"{key}.lowerAscii() in {_cel_list(lower)}")
        return parts[0] if len(parts) == 1 else "(" + " || ".join(parts) + ")"

    def has(self, rtype: str, path: str = "self") -> str:
        """CEL: the map at ``path`` has a key naming ``rtype``."""
        if rtype not in self.folded:
            return f"'{rtype}' in {path}"
        return f"{path}.exists(k, {self.names('k', [rtype])})"

    def spelling(self) -> str:
        """The valid keys, for messages: which types take any case and which are exact."""
        exact = [t for t in self.types if t not in self.folded]
        if not self.folded:
            return f"{', '.join(exact)} (case-sensitive)"
        if not exact:
            return f"{', '.join(self.folded)} (in any case)"
        return f"{', '.join(self.folded)} (in any case) or {', '.join(exact)} (case-sensitive)"


def _types_rule(field_name: str, keys: ReplicaKeys) -> dict[str, Any]:
    known = keys.names("k", keys.types)
    return rule(
        f"self.all(k, {known})",
        f"spec.{field_name} keys must be replica types: use {keys.spelling()}",
        f"'spec.{field_name} has unknown replica type \\'' + self.filter(k, !({known}))[0] + "
        f"'\\': use one of {keys.spelling()}'",
    )


def _one_key_per_type_rule(field_name: str, keys: ReplicaKeys) -> dict[str, Any]:
    """Two keys that differ only in case: upstream's defaulter would keep one of them, which one
    depending on Go's map order, and drop the other's spec without a word."""
    twin = "self.exists(j, j != k && j.lowerAscii() == k.lowerAscii())"
    canonical = "{" + ", ".join(f"'{t.lower()}': '{t}'" for t in keys.types) + "}"
    return rule(
        f"!self.exists(k, {twin})",
        f"spec.{field_name} names a replica type twice (keys that differ only in case, such as worker and "
        "Worker): keep one of them",
        f"self.filter(k, {twin}).map(k, 'spec.{field_name} has both \\'' + k + '\\' and \\'' + "
        f"self.filter(j, j != k && j.lowerAscii() == k.lowerAscii())[0] + '\\': both name the replica "
        f"type ' + {canonical}[k.lowerAscii()] + '; keep one of them')[0]",
    )


def _immutable_types_rule(field_name: str, keys: ReplicaKeys) -> dict[str, Any]:
    if keys.folded:
        # A key may change case (worker to Worker): it is the same replica type and the same pods.
        same = "{a}.all(k, {b}.exists(o, o.lowerAscii() == k.lowerAscii()))"
        expr = same.format(a="self", b="oldSelf") + " && " + same.format(a="oldSelf", b="self")
    else:
        expr = "self.all(k, k in oldSelf) && oldSelf.all(k, k in self)"
    return rule(
        expr,
        f"the replica types of spec.{field_name} are immutable: recreate the job to add or remove a "
        "replica type (replica counts and templates can change)",
    )


def replica_map(field_name: str, kind: str, keys: ReplicaKeys, spec: Schema, rules: list[dict]) -> Schema:
    """A map replica type -> ReplicaSpec with a closed key set, matched as ``keys`` says."""
    names = ", ".join(keys.types)
    any_case = (
        f" Keys {', '.join(keys.folded)} may be written in any case (worker is Worker), as "
        "training-operator accepts them."
        if keys.folded
        else ""
    )
    return {
        "description": f"Replica specs of the {kind} by replica type: {names}. Each type's pods are named "
        f"<job>-<lower-case type>-<index>.{any_case}",
        "type": "object",
        "additionalProperties": spec,
        "maxProperties": len(keys.types),
        "x-kubernetes-validations": [
            rule(
                "self.size() > 0",
                f"spec.{field_name} must have at least one replica type: add one of {names}",
            ),
            _types_rule(field_name, keys),
            *([_one_key_per_type_rule(field_name, keys)] if keys.folded else []),
            _immutable_types_rule(field_name, keys),
            *rules,
        ],
    }
