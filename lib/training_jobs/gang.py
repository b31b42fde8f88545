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

Quantities (``Quantity``): exact, held as an integer count of nano-units, parsed with
Kubernetes' grammar and printed in Kubernetes' canonical form (``resource.Quantity.String()``),
so what we write round-trips through the API server unchanged. See :func:`format_quantity`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from training_jobs.model import InvalidJob, Job, ReplicaGroup

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

# --- quantities ------------------------------------------------------------------------------

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

NANO = 10**9
_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_BY_EXP = {e: s for s, e in _DEC_SUFFIXES.items()}
_BIN_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BIN_BY_POWER = {p: s for s, p in _BIN_SUFFIXES.items()}
# <signedNumber><suffix>; an exponent suffix is an integer (Kubernetes parses it with ParseInt).
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]))?"
)
_INT32_MAX = 2**31 - 1
# Larger decimal exponents are valid for Kubernetes but would make exact integers enormous; no
# resource amount comes near 10^1000, so such input is refused instead.
_MAX_EXPONENT = 1000


@dataclass(frozen=True)
class Quantity:
    """An exact Kubernetes quantity: ``nanos`` units of 10^-9 and the format it prints in.

    Kubernetes keeps at most nano precision (finer input is rounded up, away from zero) and
    remembers whether a quantity was written with a binary suffix (``BinarySI``), an exponent
    (``DecimalExponent``) or a decimal suffix or none (``DecimalSI``).
    """

    nanos: int
    format: str = DECIMAL_SI

    @property
    def value(self) -> Decimal:
        """The exact value as a Decimal (the string constructor never rounds)."""
        return Decimal(f"{self.nanos}E-9")

    def __add__(self, other: Quantity) -> Quantity:
        """``resource.Quantity.Add``: the sum keeps the receiver's format unless it is zero."""
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def __str__(self) -> str:
        return format_quantity(self)


def _round_up(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded away from zero (inf.RoundUp)."""
    q, r = divmod(abs(numerator), denominator)
    q += 1 if r else 0
    return -q if numerator < 0 else q


def parse_quantity(text: Any) -> Quantity:
    """``resource.ParseQuantity``: Kubernetes' quantity grammar, exactly.

    ``<sign><digits>[.<digits>][Ki|Mi|Gi|Ti|Pi|Ei | e<int> | n|u|m|k|M|G|T|P|E]``; ints and floats
    (a YAML ``cpu: 2``) are read through their decimal text. Raises ``ValueError`` for anything
    the API server would refuse ("", " 1", "1.1.M", "0.1mi", "1e", ".").
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float, Decimal)):
        raise ValueError(f"quantity {text!r} is not a string or number")
    s = text if isinstance(text, str) else str(text)
    m = _QUANTITY.fullmatch(s)
    if not m or not (m["int"] or m["frac"]):
        raise ValueError(f"quantity {s!r} is not a valid Kubernetes quantity (e.g. 500m, 2, 1.5Gi)")
    frac = m["frac"] or ""
    mantissa = int((m["int"] or "") + frac or "0")
    exponent = -len(frac)
    factor = 1
    fmt = DECIMAL_SI
    if m["bin"]:
        fmt = BINARY_SI
        factor = 1024 ** _BIN_SUFFIXES[m["bin"]]
    elif m["exp"] is not None:
        fmt = DECIMAL_EXPONENT
        e = int(m["exp"])
        if abs(e) > _INT32_MAX:
            raise ValueError(f"quantity {s!r}: exponent out of range")
        exponent += e
    elif m["dec"]:
        exponent += _DEC_SUFFIXES[m["dec"]]
    if exponent > _MAX_EXPONENT:
        raise ValueError(f"quantity {s!r} is too large")
    numerator = mantissa * factor
    if m["sign"] == "-":
        numerator = -numerator
    shift = exponent + 9
    if numerator == 0:
        nanos = 0
    elif shift >= 0:
        nanos = numerator * 10**shift
    elif -shift > len(str(abs(numerator))) + 1:
        nanos = 1 if numerator > 0 else -1  # far below nano: rounds up to one nano
    else:
        nanos = _round_up(numerator, 10**-shift)
    if fmt == BINARY_SI and 0 < abs(nanos) < NANO:
        fmt = DECIMAL_SI  # Kubernetes: a binary quantity below 1 is printed as decimal
    return Quantity(nanos, fmt)


def _decimal_form(sign: str, nanos: int, fmt: str) -> str:
    """Mantissa and a power of ten that is a multiple of 3 (``AsCanonicalBytes``)."""
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3  # floor to a multiple of 3, as Go's exponent%3 switch
    mantissa *= 10**shift
    exponent -= shift
    if fmt == DECIMAL_SI and exponent in _DEC_BY_EXP:
        return f"{sign}{mantissa}{_DEC_BY_EXP[exponent]}"
    # DecimalExponent, or DecimalSI beyond E / below n: exponent notation (Kubernetes >= 1.34).
    return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")


def format_quantity(q: Quantity) -> str:
    """``resource.Quantity.String()``: the canonical text Kubernetes itself would print.

    - zero is ``0``;
    - ``DecimalSI``: the largest SI suffix (n, u, m, "", k, M, G, T, P, E) that keeps the
      mantissa an integer, trailing zeros moved into the suffix: ``1500m``, ``2``, ``1500k``,
      ``1G``; beyond ``E`` or below ``n``, exponent notation (``1e21``);
    - ``BinarySI``: an integer of at least 1024 becomes the largest binary suffix that divides it
      (``1536Mi``, ``1Gi``, ``2073741824`` when nothing divides); anything below 1024 or not an
      integer prints as ``DecimalSI`` (``512``, ``1024m``); past ``Ei``, exponent notation;
    - ``DecimalExponent``: ``<mantissa>e<multiple of 3>`` (``1e3``, ``80e-3``, ``12e6``).

    Every output is a valid quantity that parses back to the same value.
    """
    nanos = q.nanos
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    fmt = q.format if q.format in (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT) else DECIMAL_EXPONENT
    if fmt == BINARY_SI:
        if nanos < 1024 * NANO or nanos % NANO:
            fmt = DECIMAL_SI
        else:
            number, power = nanos // NANO, 0
            while number % 1024 == 0:
                number //= 1024
                power += 1
            if power in _BIN_BY_POWER or power == 0:
                return f"{sign}{number}{_BIN_BY_POWER.get(power, '')}"
            fmt = DECIMAL_EXPONENT
    return _decimal_form(sign, nanos, fmt)


def add_quantities(*values: Any) -> str:
    """Sum quantity strings as ``resource.Quantity.Add`` does; canonical text of the sum."""
    total = Quantity(0)
    for v in values:
        total = total + parse_quantity(v)
    return format_quantity(total)


def add_resource_list(total: dict[str, Quantity], requests: Any, limits: Any) -> None:
    """Upstream ``AddResourceList``: add a container's requests, or its limits when requests is unset.

    As in Go, requests that are present but empty (``requests: {}``) still win over limits.
    """
    source = requests if requests is not None else (limits or {})
    for name, amount in source.items():
        q = parse_quantity(amount)
        total[name] = total[name] + q if name in total else q


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


def pod_group_ref(job: Job, config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The job's PodGroup as a reference (upstream deletes it when the job finishes or suspends)."""
    kind = scheduler_kind(config)
    if not kind:
        return None
    return {
        "apiVersion": VOLCANO_API if kind == VOLCANO else SCHEDULER_PLUGINS_API,
        "kind": "PodGroup",
        "name": job.name,
        "namespace": job.namespace,
    }


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
) -> dict[str, Any] | None:
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
    When not, the reason says why, for the job's ``lastReconcileTime`` and an event.
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
    why = (
        f"{where} is {phase or 'not yet seen by Volcano'}: Volcano has not admitted the gang "
        f"(queue {spec.get('queue') or DEFAULT_QUEUE!r}, minMember {spec.get('minMember', 0)}), "
        f"so no pod is created yet"
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
