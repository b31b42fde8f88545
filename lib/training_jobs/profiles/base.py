"""What a framework profile is: the small part of a job kind that differs between frameworks.

The reconcile engine (``plan.py``) asks a profile to parse its kind's spec into the internal
model, name and label pods, inject the framework's env contract, add framework objects (a
ConfigMap, a Redis), and decide success or failure from replica counts. Everything else -
pods and services, restarts, run policy, conditions - is shared.

Adding a framework is one subclass here, one role and one ``watches.yaml`` entry.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from training_jobs.model import (
    ENV_DEFAULT_CONTAINER,
    RESTART_NEVER,
    RESTART_POLICIES,
    InvalidJob,
    Job,
    ReplicaGroup,
)


@dataclass
class Counts:
    """Pods of one replica group by phase, as training-operator counts them."""

    replicas: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    pending: int = 0
    # Pods being recreated this pass (failed under a restarting policy).
    restarting: int = 0


@dataclass
class Outcome:
    """A profile's verdict on a running job. ``state`` is Running, Succeeded, Failed or ''."""

    state: str = ""
    message: str = ""
    extra_status: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What a profile may look at besides the job: operator settings and observed objects."""

    config: dict[str, Any]
    pods: dict[str, dict[str, Any]]  # observed pods by name
    now: str = ""


class Profile:
    kind = ""
    api_version = ""
    framework = ""  # metrics label: tensorflow, mxnet, pytorch, xgboost, jax, mpi, paddle, caffe2
    default_container = ""
    env_target = ENV_DEFAULT_CONTAINER
    default_restart_policy = RESTART_NEVER
    default_clean_pod_policy = "None"
    # The port upstream's defaulter adds to the default container when it has none of that name.
    default_port_name = ""
    default_port = 0

    # Unique among the kinds and a valid Ansible role name: the kind's role, admission policy
    # file and user guide are named after it. Kinds that share a kind name in another group
    # (training-operator's PaddleJob) set their own.
    @property
    def name(self) -> str:
        """The profile's key in the registry; names its role, admission policy and user guide."""
        return self.kind.lower()

    # Replica types in the order upstream evaluates them; also the order of pods in plans.
    replica_types: tuple[str, ...] = ()

    @property
    def requires_default_container(self) -> bool:
        """Whether every replica template must have a container named ``default_container``."""
        return bool(self.replica_specs_field)

    # --- parsing -----------------------------------------------------------------------------
    # Kubeflow kinds keep their replica specs in one map (tfReplicaSpecs, mxReplicaSpecs).
    replica_specs_field = ""
    # The types whose map key upstream's defaulter renames from any case before reconciling
    # (``setTypeNameToCamelCase``: ``strings.EqualFold``, in memory; the stored job keeps the
    # user's key). Whether such a key gets past admission is the CRD's business
    # (hack/gen_crds ``ReplicaKeys``); a job that did is run as upstream runs it.
    camel_cased_types: tuple[str, ...] = ()
    # What the engine reads of a job each pass, besides the job: kinds that may carry its labels.
    # Kept to what the framework creates: every kind read starts a cluster-wide informer in the
    # runtime's proxy.
    observed_kinds: tuple[str, ...] = ("Pod", "Service")

    def extra_observed(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Kinds besides ``observed_kinds`` this job's spec makes the engine read (as the
        observe step's ``{apiVersion, kind, key}``): only jobs that need them start the
        runtime's informer for them."""
        return []

    def replica_specs(self, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The kind's replica specs as ``{rtype: ReplicaSpec}``, keys of ``camel_cased_types``
        renamed to the type as upstream's defaulter does (ASCII case only: the Kelvin sign and
        long s that ``strings.EqualFold`` also folds stay unknown, as at admission). Two keys
        naming one type make the job invalid: upstream would keep either, by Go's map order."""
        canon = {t.lower(): t for t in self.camel_cased_types}
        out: dict[str, dict[str, Any]] = {}
        written: dict[str, str] = {}
        for key, value in (spec.get(self.replica_specs_field) or {}).items():
            key = str(key)
            rtype = canon.get(key.lower(), key) if key.isascii() else key
            if rtype in written:
                raise InvalidJob(
                    f"{self.replica_specs_field} has both {written[rtype]!r} and {key!r}: both name "
                    f"the replica type {rtype}; keep one of them"
                )
            written[rtype] = key
            out[rtype] = value
        return out

    def run_policy(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The job's RunPolicy (training-operator's ``spec.runPolicy``; some kinds also read inline fields)."""
        return dict(spec.get("runPolicy") or {})

    def clean_pod_policy(self, job: Job, succeeded: bool = False) -> str:
        """runPolicy.cleanPodPolicy (None, Running or All) in force when the job finished."""
        return job.run_policy.get("cleanPodPolicy") or self.default_clean_pod_policy

    def type_label(self, rtype: str) -> str:
        """The replica type as it appears in pod names and the replica-type label."""
        return rtype.lower()

    def default_restart_policy_for(self, rtype: str, spec: dict[str, Any]) -> str:
        """The restartPolicy of a replica spec that sets none."""
        return self.default_restart_policy

    def default_replicas_for(self, rtype: str) -> int:
        """Replicas of a type whose spec leaves them out (upstream's defaulter: 1)."""
        return 1

    def job(self, cr: dict[str, Any]) -> Job:
        """The job model of a custom resource: replica groups in the profile's order, defaults applied."""
        meta = cr.get("metadata") or {}
        spec = cr.get("spec") or {}
        groups = []
        specs = self.replica_specs(spec)
        for rtype in self.replica_types:
            rs = specs.get(rtype)
            if rs is None:
                continue
            policy = rs.get("restartPolicy") or self.default_restart_policy_for(rtype, spec)
            if policy not in RESTART_POLICIES:
                raise InvalidJob(
                    f"{rtype} restartPolicy {policy!r} is not one of {', '.join(RESTART_POLICIES)}"
                )
            replicas = _replicas(rtype, rs.get("replicas"), self.default_replicas_for(rtype))
            template = copy.deepcopy(rs.get("template") or {})
            check_template(rtype, template)
            self.default_ports(template)
            groups.append(
                ReplicaGroup(
                    rtype=rtype,
                    label=self.type_label(rtype),
                    replicas=replicas,
                    restart_policy=policy,
                    template=template,
                )
            )
        unknown = sorted(set(specs) - set(self.replica_types))
        if unknown:
            raise InvalidJob(
                f"unknown replica type(s) {', '.join(unknown)}: use {', '.join(self.replica_types)}"
            )
        return Job(
            kind=cr.get("kind") or self.kind,
            api_version=cr.get("apiVersion") or self.api_version,
            name=meta.get("name", ""),
            namespace=meta.get("namespace", ""),
            uid=meta.get("uid", ""),
            spec=spec,
            status=dict(cr.get("status") or {}),
            metadata=meta,
            groups=tuple(groups),
            run_policy=self.run_policy(spec),
        )

    def default_ports(self, template: dict[str, Any]) -> None:
        """Upstream's in-memory defaulting: the default container gets the framework's port."""
        if not self.default_port_name:
            return
        for c in (template.get("spec") or {}).get("containers") or []:
            if c.get("name") == self.default_container:
                ports = c.setdefault("ports", [])
                if not any(p.get("name") == self.default_port_name for p in ports):
                    ports.append({"name": self.default_port_name, "containerPort": self.default_port})

    def validate(self, job: Job) -> None:
        """Raise :class:`InvalidJob` for what admission could not catch (e.g. no admission policy)."""
        if not job.groups:
            raise InvalidJob("the job has no replica specs: add at least one replica type")
        for g in job.groups:
            if g.replicas < 0:
                raise InvalidJob(f"{g.rtype} replicas must be 0 or more")
            if not g.containers:
                raise InvalidJob(f"{g.rtype} template has no containers: add the training container")
            for c in g.containers:
                if not c.get("image"):
                    raise InvalidJob(f"{g.rtype} container {c.get('name')!r} has no image: set one")
            # Kubeflow's kinds (a replica-spec map) read their port from the framework's container,
            # and training-operator's webhooks refuse a template without it.
            if self.requires_default_container and not any(
                c.get("name") == self.default_container for c in g.containers
            ):
                raise InvalidJob(
                    f"{self.replica_specs_field}.{g.rtype} must have a container named "
                    f"'{self.default_container}': rename the training container"
                )

    # --- naming and labels -------------------------------------------------------------------
    # A label key every pod of this kind carries, whatever its job: the companion's wake watcher
    # watches pods that have it (lib/training_wake).
    wake_label = "training.kubeflow.org/operator-name"

    def controller_name(self) -> str:
        """The ``training.kubeflow.org/operator-name`` label value (upstream's controller name)."""
        return f"{self.kind.lower()}-controller"

    def selector_for(self, name: str, namespace: str) -> dict[str, str]:
        """Labels every object of the job carries; the engine lists the job's objects by them."""
        return {
            "training.kubeflow.org/operator-name": self.controller_name(),
            "training.kubeflow.org/job-name": name,
        }

    def selector(self, job: Job) -> dict[str, str]:
        """Labels every object of this job carries (``selector_for`` its name and namespace)."""
        return self.selector_for(job.name, job.namespace)

    def pod_name(self, job: Job, group: ReplicaGroup, index: int) -> str:
        """The name of the pod of one replica: ``<job>-<type>-<index>`` unless the kind differs."""
        return f"{job.name}-{group.label}-{index}"

    def service_name(self, job: Job, group: ReplicaGroup, index: int) -> str:
        """The name of the replica's headless Service; the pod's name unless the kind differs."""
        return self.pod_name(job, group, index)

    def is_master_role(self, job: Job, group: ReplicaGroup, index: int) -> bool:
        """Whether the replica's pod gets ``training.kubeflow.org/job-role: master``."""
        return False

    def pod_labels(self, job: Job, group: ReplicaGroup, index: int) -> dict[str, str]:
        """The labels of a replica's pod: the job's selector, replica type and index, the role."""
        labels = {
            **self.selector(job),
            "training.kubeflow.org/replica-type": group.label,
            "training.kubeflow.org/replica-index": str(index),
        }
        if self.is_master_role(job, group, index):
            labels["training.kubeflow.org/job-role"] = "master"
        return labels

    def group_selector(self, job: Job, group: ReplicaGroup) -> str:
        """``replicaStatuses[*].selector``: a label selector string for the group's pods."""
        labels = {**self.selector(job), "training.kubeflow.org/replica-type": group.label}
        return ",".join(f"{k}={v}" for k, v in labels.items())

    def replica_index(self, pod: dict[str, Any]) -> tuple[str, int] | None:
        """(type label, index) of one of our pods, from its labels."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        rtype = labels.get("training.kubeflow.org/replica-type")
        index = labels.get("training.kubeflow.org/replica-index")
        if rtype is None or index is None or not str(index).isdigit():
            return None
        return rtype, int(index)

    # --- framework contract ------------------------------------------------------------------
    def env(self, job: Job, group: ReplicaGroup, index: int, ctx: Context) -> list[dict[str, Any]]:
        """The framework's environment variables for a replica (TF_CONFIG, MASTER_ADDR, ...)."""
        return []

    def env_from(self, job: Job, group: ReplicaGroup, index: int, ctx: Context) -> list[dict[str, Any]]:
        """``envFrom`` sources the framework adds to a replica's containers (a ConfigMap of addresses)."""
        return []

    def decorate_pod(
        self, job: Job, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: Context
    ) -> None:
        """Framework-specific pod changes (hostname, ports, hostNetwork). Mutates ``pod``."""

    def service_ports(self, job: Job, group: ReplicaGroup) -> list[dict[str, Any]]:
        """Ports of the per-replica headless Service: the default container's ports."""
        for c in group.containers:
            if c.get("name") == self.default_container:
                return [
                    {"name": p["name"], "port": p["containerPort"], "targetPort": p["containerPort"]}
                    for p in c.get("ports") or []
                    if p.get("name") and p.get("containerPort")
                ]
        return []

    def wants_services(self, job: Job) -> bool:
        """Whether each replica gets a headless Service (MPIJob's workers need none)."""
        return True

    def extra_objects(self, job: Job, ctx: Context) -> list[dict[str, Any]]:
        """Objects the framework needs besides pods and services (ConfigMaps, a Redis)."""
        return []

    # Fields of extra objects kept as the job wants them, by kind (MPIJob's hostfile and its
    # launcher's Role follow the workers); other extra objects are only created.
    extras_kept_current: dict[str, str] = {}

    # Kinds of extra objects deleted while the job is suspended, and created again on resume:
    # objects that would act on the suspended job (PyTorchJob's autoscaler).
    extras_removed_while_suspended: tuple[str, ...] = ()

    def extra_objects_first(self, job: Job, ctx: Context) -> bool:
        """Whether extra objects must exist before any pod is created."""
        return False

    # --- status ------------------------------------------------------------------------------
    def outcome(self, job: Job, counts: dict[str, Counts], ctx: Context) -> Outcome:
        """The job's state from its pods' counts: running, succeeded or failed, with the reason."""
        raise NotImplementedError

    def status_extras(
        self, job: Job, counts: dict[str, Counts], ctx: Context, conditions: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Kind-specific status fields besides conditions and replicaStatuses."""
        return {}


def _replicas(rtype: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).lstrip("-").isdigit():
        raise InvalidJob(f"{rtype} replicas must be a whole number, not {value!r}")
    return int(value)


def _is_map(value: Any) -> bool:
    return isinstance(value, dict)


def _check_container(where: str, c: Any) -> None:
    if not _is_map(c):
        raise InvalidJob(f"{where} must be an object with name and image")
    for port in c.get("ports") or []:
        number = port.get("containerPort") if _is_map(port) else None
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
            raise InvalidJob(f"{where} port {port!r}: containerPort must be a number from 1 to 65535")
    resources = c.get("resources") or {}
    if not _is_map(resources) or not all(_is_map(resources.get(k) or {}) for k in ("requests", "limits")):
        raise InvalidJob(f"{where} resources must map requests and limits to quantities, as in a pod")
    for part in ("env", "ports", "volumeMounts"):
        items = c.get(part) or []
        if not isinstance(items, list) or not all(_is_map(i) for i in items):
            raise InvalidJob(f"{where} {part} must be a list of objects, as in a pod")


def check_template(rtype: str, template: Any) -> None:
    """The parts of a pod template the engine reads must have a pod's shape: the CRDs keep
    templates schemaless, and a typo must fail the job with its path, not the reconcile."""
    if (
        not _is_map(template)
        or not _is_map(template.get("spec") or {})
        or not _is_map(template.get("metadata") or {})
    ):
        raise InvalidJob(f"{rtype} template must be a pod template: an object with metadata and spec")
    spec = template.get("spec") or {}
    for key in ("containers", "initContainers", "volumes"):
        if not isinstance(spec.get(key) or [], list):
            raise InvalidJob(f"{rtype} template spec.{key} must be a list")
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or []):
            _check_container(f"{rtype} template spec.{key}[{i}]", c)


def failed_for_good(job: Job, counts: dict[str, Counts], short_only: bool = False) -> tuple[str, int] | None:
    """The first replica type, in the kind's order, with pods that failed and are not being
    recreated, and how many. ``short_only``: only while the type is short of replicas (neither
    running nor done), as training-operator's ``specReplicas > succeeded + running`` gate:
    surplus failed pods left by a scale-down cannot fail a job that is whole."""
    for g in job.groups:
        c = counts[g.rtype]
        failed = c.failed - c.restarting
        if failed > 0 and (not short_only or g.replicas > c.succeeded + c.active):
            return g.rtype, failed
    return None


def failed_groups_message(job: Job, rtype: str, failed: int) -> str:
    return f"{job.kind} {job.namespace}/{job.name} has failed because {failed} {rtype} replica(s) failed."
