"""Gang scheduling as training-operator v1.9 does it: a PodGroup per job, decorated pods, a gate.

Upstream (``pkg/controller.v1/common/job.go`` ``ReconcileJobs``, ``util.go`` ``CalcPGMinResources``,
``control/podgroup_control.go``, ``pod.go`` ``createNewPod``), enabled by
``--gang-scheduler-name``; here by the operator config key ``gang_scheduler``:

- ``volcano``: a ``scheduling.volcano.sh/v1beta1`` PodGroup, pods get ``schedulerName: volcano``
  and the annotations ``scheduling.k8s.io/group-name`` / ``volcano.sh/task-spec``; no pod is
  created until Volcano has admitted the PodGroup (phase set and not ``Pending``);
- any other name: a scheduler-plugins (coscheduling) ``scheduling.x-k8s.io/v1alpha1`` PodGroup,
  pods get that ``schedulerName`` and the label ``scheduling.x-k8s.io/pod-group``; pods are
  created at once.

Differences from upstream, on purpose:

- replica groups with equal priority keep the profile's order when ``minResources`` is computed
  (upstream sorts a Go map with an unstable sort, so the result could change between passes);
- an update is only needed when a field this operator owns differs, compared quantity-aware
  (upstream PR #2079 fixed update loops caused by comparing whole objects);
- ``kubectl.kubernetes.io/last-applied-configuration`` is not copied from the job to the
  PodGroup: it describes the job, and ``kubectl apply`` would misread it on the PodGroup.

Resource arithmetic (the PodGroup's ``minResources``) is :mod:`training_jobs.quantity`'s.
"""

from __future__ import annotations

from typing import Any

from training_jobs.model import InvalidJob, Job, PlanEvent, ReplicaGroup
from training_jobs.quantity import Quantity, add_resource_list, format_quantity, parse_quantity

VOLCANO = "volcano"
SCHEDULER_PLUGINS = "scheduler-plugins"

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
SCHEDULER_PLUGINS_API = "scheduling.x-k8s.io/v1alpha1"

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"  # volcano KubeGroupNameAnnotationKey
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"  # volcano batch TaskSpecKey
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins PodGroupLabel

DEFAULT_QUEUE = "default"
# Not copied from the job to its PodGroup: client bookkeeping, and the wake watcher's pod
# signature (lib/training_wake), which changes with every pod phase.
SKIPPED_ANNOTATIONS = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", "training.ato.dev/pod-signature"}
)

# --- the gang ----------------------------------------------------------------------------------


def scheduler_kind(config: dict[str, Any] | None) -> str:
    """Which gang scheduler the operator uses: ``--gang-scheduler-name`` of training-operator.

    ``volcano`` -> ``"volcano"``; any other non-empty name -> ``"scheduler-plugins"`` (that name
    is the pods' schedulerName); unset or empty -> ``""`` (no gang scheduling).
    """
    name = str((config or {}).get("gang_scheduler") or "").strip()
    if not name:
        return ""
    return VOLCANO if name == VOLCANO else SCHEDULER_PLUGINS


def scheduler_name(config: dict[str, Any] | None) -> str:
    """The schedulerName gang pods get (upstream ``PodGroupControl.GetSchedulerName``)."""
    return str((config or {}).get("gang_scheduler") or "").strip()


def scheduling_policy(job: Job) -> dict[str, Any]:
    """``runPolicy.schedulingPolicy``, or PaddleJob's top-level ``spec.schedulingPolicy``.

    paddle-operator kept its Volcano settings at ``spec.schedulingPolicy``; the PaddleJob CRD
    allows only one of the two, and the other kinds' CRDs prune the top-level field.
    """
    return dict(job.run_policy.get("schedulingPolicy") or job.spec.get("schedulingPolicy") or {})


def min_member(job: Job) -> int:
    """PodGroup ``minMember``: ``schedulingPolicy.minAvailable`` if set, else the total replicas.

    Upstream ``ReconcileJobs``: ``minMember := totalReplicas``, replaced by ``minAvailable`` when
    that pointer is set (so an explicit 0 is kept).
    """
    value = scheduling_policy(job).get("minAvailable")
    return job.total_replicas if value is None else int(value)


def _priority(group: ReplicaGroup, priority_classes: dict[str, Any]) -> int:
    name = (group.template.get("spec") or {}).get("priorityClassName") or ""
    try:
        return int((priority_classes or {}).get(name, 0))
    except (TypeError, ValueError):
        return 0


def min_resources(job: Job, priority_classes: dict[str, Any]) -> dict[str, str]:
    """PodGroup ``minResources``: ``schedulingPolicy.minResources``, else ``CalcPGMinResources``.

    Upstream: replica types sorted by the value of their template's PriorityClass (descending,
    unknown class 0), then the first ``minMember`` pods contribute each container's requests (or
    limits when requests is unset); init containers are not counted. Equal priorities keep the
    profile's replica-type order here. Values are canonical quantity strings; a quantity that is
    not one raises :class:`InvalidJob`.
    """
    policy = scheduling_policy(job)
    try:
        if policy.get("minResources") is not None:
            return {k: format_quantity(parse_quantity(v)) for k, v in sorted(policy["minResources"].items())}
        wanted = min_member(job)
        ordered = sorted(enumerate(job.groups), key=lambda ig: (-_priority(ig[1], priority_classes), ig[0]))
        total: dict[str, Quantity] = {}
        count = 0
        for _, group in ordered:
            for _ in range(group.replicas):
                if count >= wanted:
                    break
                count += 1
                for c in group.containers:
                    res = c.get("resources") or {}
                    add_resource_list(total, res.get("requests"), res.get("limits"))
        return {k: format_quantity(v) for k, v in sorted(total.items())}
    except ValueError as err:
        raise InvalidJob(f"gang scheduling: {err}") from err


def pod_group(
    job: Job,
    config: dict[str, Any] | None,
    priority_classes: dict[str, Any],
    existing: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any] | None:
    """The desired PodGroup of the job (upstream ``SyncPodGroup`` with its spec fill function).

    Volcano: ``{minMember, queue, priorityClassName, minResources}``; the queue is the existing
    PodGroup's if it has one (PR #1977), else ``schedulingPolicy.queue``, else ``default``.
    scheduler-plugins: ``{minMember, minResources, scheduleTimeoutSeconds}``. Name and namespace
    are the job's, annotations are copied from the job, ``labels`` are the caller's (the job's
    selector labels), and the job is the controller owner. Empty optional fields are left out, as
    the Go types' ``omitempty`` does. ``None`` when gang scheduling is off.
    """
    kind = scheduler_kind(config)
    if not kind:
        return None
    policy = scheduling_policy(job)
    spec: dict[str, Any] = {"minMember": min_member(job)}
    resources = min_resources(job, priority_classes)
    if kind == VOLCANO:
        queue = ((existing or {}).get("spec") or {}).get("queue") or policy.get("queue") or DEFAULT_QUEUE
        spec["queue"] = queue
        if policy.get("priorityClass"):
            spec["priorityClassName"] = policy["priorityClass"]
        if resources:
            spec["minResources"] = resources
    else:
        if resources:
            spec["minResources"] = resources
        if policy.get("scheduleTimeoutSeconds") is not None:
            spec["scheduleTimeoutSeconds"] = int(policy["scheduleTimeoutSeconds"])
    annotations = {
        k: v for k, v in (job.metadata.get("annotations") or {}).items() if k not in SKIPPED_ANNOTATIONS
    }
    metadata: dict[str, Any] = {"name": job.name, "namespace": job.namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [job.owner_reference]
    return {
        "apiVersion": VOLCANO_API if kind == VOLCANO else SCHEDULER_PLUGINS_API,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }


def decorate_pod(
    pod: dict[str, Any], job: Job, group: ReplicaGroup, config: dict[str, Any] | None
) -> PlanEvent | None:
    """Tie a desired pod to the job's gang (upstream ``DecoratePodTemplateSpec``); mutates ``pod``.

    The gang scheduler becomes the pod's ``schedulerName`` only when the replica's template has
    none. As upstream, the gang annotations (Volcano: ``scheduling.k8s.io/group-name: <job>``,
    ``volcano.sh/task-spec: <replica type>``) or label (scheduler-plugins:
    ``scheduling.x-k8s.io/pod-group: <job>``) are set either way, so a template that names the
    gang scheduler itself still joins the gang. A template naming *another* scheduler keeps it,
    and the returned Warning event ``SetPodTemplateSchedulerName`` says so (upstream
    ``isCustomSchedulerSet``); otherwise ``None``.
    """
    kind = scheduler_kind(config)
    if not kind:
        return None
    name = scheduler_name(config)
    own = ((group.template.get("spec") or {}).get("schedulerName") or "").strip()
    spec = pod.setdefault("spec", {})
    meta = pod.setdefault("metadata", {})
    if not own:
        spec["schedulerName"] = name
    if kind == VOLCANO:
        annotations = meta.get("annotations") or {}
        annotations[GROUP_NAME_ANNOTATION] = job.name
        annotations[TASK_SPEC_ANNOTATION] = group.label
        meta["annotations"] = annotations
    else:
        labels = meta.get("labels") or {}
        labels[POD_GROUP_LABEL] = job.name
        meta["labels"] = labels
    if own and own != name:
        return {
            "type": "Warning",
            "reason": "SetPodTemplateSchedulerName",
            "message": (
                f"{group.rtype} pod template sets schedulerName {own!r}: another scheduler is specified "
                f"when gang-scheduling is enabled and it will not be overwritten, so {name} does not "
                f"gang-schedule these pods"
            ),
        }
    return None


def may_create_pods(kind: str, observed_pod_group: dict[str, Any] | None) -> tuple[bool, str]:
    """Whether pods may be created now (upstream ``DelayPodCreationDueToPodGroup``, negated).

    Volcano: only once the observed PodGroup has a phase other than ``Pending`` (``Inqueue``,
    ``Running``, ...), i.e. Volcano admitted the whole gang; a missing PodGroup also waits
    (issues #1630, #1729: a job that never gets pods). scheduler-plugins and no gang: always.
    When not, the reason says why (what the gang needs and Volcano's latest condition), for the
    job's ``podGroupPendingMessage`` and its ``PodGroupPending`` event.
    """
    if kind != VOLCANO:
        return True, ""
    if not observed_pod_group:
        return False, "waiting for the Volcano PodGroup to be created"
    meta = observed_pod_group.get("metadata") or {}
    status = observed_pod_group.get("status") or {}
    phase = status.get("phase") or ""
    if phase and phase != "Pending":
        return True, ""
    spec = observed_pod_group.get("spec") or {}
    where = f"PodGroup {meta.get('namespace', '')}/{meta.get('name', '')}"
    queue = spec.get("queue") or DEFAULT_QUEUE
    why = (
        f"{where} is {phase or 'not yet seen by Volcano'}: Volcano has not admitted the gang "
        f"(queue {queue!r}, minMember {spec.get('minMember', 0)}), so no pod is created yet"
    )
    if spec.get("minResources"):
        # Volcano's enqueue (proportion plugin) admits a gang only when its whole minResources fit
        # what the queue may still use; its refusal is an event on the PodGroup, not on the job.
        wanted = ", ".join(f"{k} {v}" for k, v in sorted(spec["minResources"].items()))
        why += (
            f"; the gang needs minResources {wanted}, admitted only when queue {queue!r} "
            f"(its capability, at most the cluster's allocatable resources) has that much free"
        )
    conditions = [c for c in status.get("conditions") or [] if c.get("message")]
    if conditions:
        latest = max(conditions, key=lambda c: c.get("lastTransitionTime") or "")
        why += f"; {latest.get('reason') or latest.get('type')}: {latest['message']}"
    return False, why


def _same_resources(a: Any, b: Any) -> bool:
    a, b = a or {}, b or {}
    try:
        qa = {k: parse_quantity(v).nanos for k, v in a.items()}
        qb = {k: parse_quantity(v).nanos for k, v in b.items()}
    except ValueError:
        return False
    return all(qa.get(k, 0) == qb.get(k, 0) for k in set(qa) | set(qb))


def needs_update(desired: dict[str, Any], observed: dict[str, Any]) -> bool:
    """Whether the observed PodGroup's spec must be updated to the desired one (upstream PR #2079).

    Only the fields this operator sets are compared - ``minMember``, ``minResources`` (by value:
    ``1Gi`` equals ``1024Mi``; a missing resource equals zero), ``queue``, ``priorityClassName``,
    ``scheduleTimeoutSeconds`` - so fields a scheduler adds never cause an update loop.
    """
    want = desired.get("spec") or {}
    have = observed.get("spec") or {}
    if int(want.get("minMember") or 0) != int(have.get("minMember") or 0):
        return True
    if not _same_resources(want.get("minResources"), have.get("minResources")):
        return True
    for field in ("queue", "priorityClassName"):
        if (want.get(field) or "") != (have.get(field) or ""):
            return True
    return want.get("scheduleTimeoutSeconds") != have.get("scheduleTimeoutSeconds")
