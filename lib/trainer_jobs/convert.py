"""``convert``: a Kubeflow training-operator v1 job as a TrainJob on a built-in runtime.

A user moving to Trainer v2 hands :func:`convert` a ``kubeflow.org/v1`` PyTorchJob, XGBoostJob,
JAXJob or MPIJob as a manifest and gets the TrainJob (``trainer.kubeflow.org/v1alpha1``) on the
built-in runtime of its framework (``config/runtimes``: Trainer v2.3.0's ``torch-distributed``,
``xgboost-distributed``, ``jax-distributed``; an MPIJob goes to ``deepspeed-distributed``, the
general OpenMPI one), with a note for everything that did not carry over or means something else
in v2. What carries over, and where:

| v1 | TrainJob |
| --- | --- |
| the framework container of the first node template (Master, else Worker; MPI: the Launcher) | ``trainer.image``, ``command``, ``args``, ``env`` (less the variables the runtime sets), ``resourcesPerNode`` (MPI: the Worker's) |
| the node replicas (Master + Worker; JAX: Worker; MPI: Worker, the launcher being a node) | ``trainer.numNodes`` |
| ``nprocPerNode`` (a number) / ``slotsPerWorker`` | ``trainer.numProcPerNode`` |
| ``runPolicy.suspend``, ``activeDeadlineSeconds``, ``managedBy`` (MultiKueue) | ``spec.suspend``, ``activeDeadlineSeconds``, ``managedBy`` |
| job labels and annotations | the TrainJob's (a Kueue queue label keeps working: Kueue serves TrainJobs) |
| pod labels, annotations, ``nodeSelector``, ``affinity``, ``tolerations``, ``serviceAccountName``, ``volumes``, ``imagePullSecrets``, ``securityContext``, ``schedulingGates``, ``terminationGracePeriodSeconds``; the container's ``volumeMounts`` and ``securityContext`` | one ``runtimePatches`` entry (manager :data:`MANAGER`) |

Anything else becomes a note (:class:`Converted`). TFJob, both PaddleJobs, MXJob and Caffe2Job
have no runtime upstream: :class:`Refused`, saying what to do instead. Pure: a dict in, a dict
and strings out; the command ``hack/convert-to-trainjob.py`` reads and writes the files.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from trainer_jobs import api

V1 = "kubeflow.org/v1"
# Who owns the runtime patch the conversion writes (a domain-prefixed path, as the API asks).
MANAGER = "training.ato.dev/convert"
# This operator's own marks on a v1 job (its bookkeeping, its v1-only TensorBoard option).
OPERATOR_PREFIX = "training.ato.dev/"
DROPPED_METADATA = {"kubectl.kubernetes.io/last-applied-configuration"}

# What a runtime patch may set on a pod (the TrainJob CRD's runtimePatches schema, v2.3).
PATCHABLE_POD_FIELDS = (
    "serviceAccountName",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "affinity",
    "tolerations",
    "schedulingGates",
    "terminationGracePeriodSeconds",
)
PATCHABLE_CONTAINER_FIELDS = ("volumeMounts", "securityContext")
TRAINER_CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "resources", "ports"}


class Refused(ValueError):
    """The manifest has no TrainJob on a built-in runtime; the message says what to do instead."""


@dataclass(frozen=True)
class Source:
    """A v1 kind that maps to a built-in runtime."""

    kind: str
    runtime: str
    specs_field: str
    node_types: tuple[str, ...]
    container: str
    # Variables the runtime's policy sets: a TrainJob may not (or its value would be lost).
    reserved: tuple[str, ...]
    # What the training code reads in v2 instead of what this operator's v1 pods get.
    env_change: str
    launcher: str | None = None


SOURCES = {
    "PyTorchJob": Source(
        "PyTorchJob",
        "torch-distributed",
        "pytorchReplicaSpecs",
        ("Master", "Worker"),
        "pytorch",
        ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"),
        "the pods get torchrun's PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and "
        "PET_MASTER_PORT (29500), not MASTER_ADDR, MASTER_PORT, WORLD_SIZE or RANK: start the training "
        "with torchrun, which sets those for each process",
    ),
    "XGBoostJob": Source(
        "XGBoostJob",
        "xgboost-distributed",
        "xgbReplicaSpecs",
        ("Master", "Worker"),
        "xgboost",
        ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"),
        "the pods get DMLC_TRACKER_URI, DMLC_TRACKER_PORT (29500), DMLC_TASK_ID and DMLC_NUM_WORKER, not "
        "MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, WORKER_PORT or WORKER_ADDRS: the training code reads "
        "those (rank 0 runs the Rabit tracker)",
    ),
    "JAXJob": Source(
        "JAXJob",
        "jax-distributed",
        "jaxReplicaSpecs",
        ("Worker",),
        "jax",
        ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"),
        "the pods get JAX_COORDINATOR_ADDRESS (port 29500), JAX_NUM_PROCESSES and JAX_PROCESS_ID, not "
        "COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES or PROCESS_ID: the training code reads those",
    ),
    "MPIJob": Source(
        "MPIJob",
        "deepspeed-distributed",
        "mpiReplicaSpecs",
        ("Worker",),
        "mpi",
        (
            "OMPI_MCA_orte_default_hostfile",
            "OMPI_MCA_plm_rsh_args",
            "OMPI_MCA_orte_keep_fqdn_hostnames",
            "OMPI_MCA_orte_set_default_slots",
        ),
        "mpirun reaches the workers over SSH (the runtime's keys, /etc/mpi/hostfile), not kubectl exec: "
        "the worker pods run the runtime's image (an SSH server; the Worker template's image and command "
        "do not carry over) and the launcher, itself a node of the hostfile, runs the Launcher's command",
        launcher="Launcher",
    ),
}

_NO_RUNTIME = (
    "Kubeflow Trainer v2.3 has no built-in runtime for {what}. Either keep the {kind}: this operator "
    "serves it as before, beside TrainJobs; or write a TrainingRuntime whose mlPolicy "
    "names no framework (plain ML: numNodes pods of its replicated job 'node', each with the TrainJob's "
    "image, command and env) and {setup}, and a TrainJob on it (docs/user-guide-trainjob.md)."
)
REFUSED = {
    (V1, "TFJob"): ("TensorFlow", "have the training code build TF_CONFIG from the JobSet's pod host names"),
    (V1, "PaddleJob"): ("Paddle", "start paddle.distributed.launch with the JobSet's pod host names"),
    ("batch.paddlepaddle.org/v1", "PaddleJob"): (
        "Paddle (paddle-operator's PaddleJob)",
        "start paddle.distributed.launch with the JobSet's pod host names",
    ),
    (V1, "MXJob"): ("MXNet", "set MXNet's DMLC_* roles yourself, one replicated job per role"),
    ("kubeflow.org/v1alpha1", "Caffe2Job"): ("Caffe2", "give the pods the rendezvous Caffe2 needs yourself"),
}


@dataclass
class Converted:
    """The TrainJob, and what did not carry over or changed meaning, one sentence each."""

    trainjob: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def source_of(job: Any) -> Source:
    if not isinstance(job, dict):
        raise Refused("not a Kubernetes object (a YAML or JSON map)")
    api_version, kind = job.get("apiVersion", ""), job.get("kind", "")
    if (api_version, kind) in REFUSED:
        what, setup = REFUSED[(api_version, kind)]
        raise Refused(f"{kind} ({api_version}): " + _NO_RUNTIME.format(what=what, kind=kind, setup=setup))
    if api_version == api.API_VERSION and kind == api.TRAINJOB:
        raise Refused("already a TrainJob: nothing to convert")
    if api_version != V1 or kind not in SOURCES:
        known = ", ".join(sorted(SOURCES))
        raise Refused(
            f"{kind or '?'} ({api_version or '?'}) is not a kubeflow.org/v1 job this converts ({known})"
        )
    return SOURCES[kind]


def replica_specs(job: dict[str, Any], source: Source) -> dict[str, dict[str, Any]]:
    """The replica specs by their canonical type (the CRDs accept any case, as upstream's defaulter)."""
    specs = (job.get("spec") or {}).get(source.specs_field)
    if not isinstance(specs, dict) or not specs:
        raise Refused(f"{source.kind} {name_of(job)}: spec.{source.specs_field} is empty")
    known = [*source.node_types, *([source.launcher] if source.launcher else [])]
    found: dict[str, dict[str, Any]] = {}
    for key, spec in specs.items():
        canonical = next((t for t in known if t.lower() == str(key).lower()), None)
        if canonical is None:
            raise Refused(f"{source.kind} {name_of(job)}: replica type {key!r} is not one of {known}")
        found[canonical] = spec if isinstance(spec, dict) else {}
    needed = source.launcher or "/".join(source.node_types)
    if not any(t in found for t in needed.split("/")):
        raise Refused(f"{source.kind} {name_of(job)}: spec.{source.specs_field} needs a {needed}")
    return found


def name_of(job: dict[str, Any]) -> str:
    metadata = job.get("metadata") or {}
    return str(metadata.get("name") or metadata.get("generateName") or "(unnamed)")


def replicas_of(source: Source, rtype: str, spec: dict[str, Any] | None) -> int:
    """Upstream's defaulter: 1 replica when left out, but an MPIJob's Worker 0."""
    if spec is None:
        return 0
    default = 0 if source.launcher and rtype != source.launcher else 1
    value = spec.get("replicas")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def pod_spec(spec: dict[str, Any] | None) -> dict[str, Any]:
    return ((spec or {}).get("template") or {}).get("spec") or {}


def main_container(pod: dict[str, Any], wanted: str, rtype: str, notes: list[str]) -> dict[str, Any]:
    """The framework's container (MPI: ``spec.mainContainer`` or ``mpi``), else the first one."""
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    if not containers:
        raise Refused(f"the {rtype} template has no container")
    chosen = next((c for c in containers if c.get("name") == wanted), None)
    if chosen is None:
        chosen = containers[0]
        notes.append(
            f"{rtype}: no container named {wanted!r}; the first, {chosen.get('name')!r}, is the trainer"
        )
    for other in containers:
        if other is not chosen:
            notes.append(
                f"{rtype}: container {other.get('name')!r} is dropped: a TrainJob runs one trainer container "
                "(node) per pod; add a sidecar in a TrainingRuntime of your own"
            )
    for init in pod.get("initContainers") or []:
        notes.append(
            f"{rtype}: init container {init.get('name')!r} is dropped: runtime patches only change the "
            "runtime's own init containers; add it in a TrainingRuntime of your own"
        )
    return chosen


def trainer_env(
    container: dict[str, Any], source: Source, rtype: str, notes: list[str]
) -> list[dict[str, Any]]:
    env = []
    for var in container.get("env") or []:
        if isinstance(var, dict) and var.get("name") in source.reserved:
            notes.append(f"{rtype}: env {var['name']} is dropped: the {source.runtime} runtime sets it")
        elif isinstance(var, dict):
            env.append(copy.deepcopy(var))
    if container.get("envFrom"):
        notes.append(
            f"{rtype}: envFrom is dropped: a TrainJob's trainer takes env only; list the variables "
            "(valueFrom configMapKeyRef / secretKeyRef)"
        )
    return env


def trainer_of(container: dict[str, Any], source: Source, rtype: str, notes: list[str]) -> dict[str, Any]:
    """``spec.trainer`` from the framework container, but ``numNodes`` and ``resourcesPerNode``."""
    trainer: dict[str, Any] = {}
    for key in ("image", "command", "args"):
        if container.get(key):
            trainer[key] = copy.deepcopy(container[key])
    env = trainer_env(container, source, rtype, notes)
    if env:
        trainer["env"] = env
    name = container.get("name")
    if container.get("ports"):
        opens = "SSH's" if source.launcher else f"its framework's, {api.TRAINER_PORT}"
        notes.append(
            f"{rtype}: container {name!r}: ports are dropped: the {source.runtime} runtime opens {opens}"
        )
    for key in sorted(set(container) - TRAINER_CONTAINER_FIELDS - set(PATCHABLE_CONTAINER_FIELDS)):
        notes.append(
            f"{rtype}: container {name!r}: {key} is dropped: a TrainJob sets the trainer's image, command, "
            "args, env and resources only (the rest is its runtime's)"
        )
    return trainer


def resources_per_node(container: dict[str, Any], rtype: str, notes: list[str]) -> dict[str, Any]:
    resources = container.get("resources") or {}
    if resources.get("claims"):
        notes.append(f"{rtype}: resources.claims are dropped: a runtime patch cannot add resource claims")
    return {key: copy.deepcopy(resources[key]) for key in ("limits", "requests") if resources.get(key)}


def num_nodes(specs: dict[str, dict[str, Any]], source: Source, notes: list[str]) -> int:
    """The pods that train: every node replica (an MPIJob's launcher is one of its nodes in v2)."""
    if source.launcher:
        workers = replicas_of(source, "Worker", specs.get("Worker"))
        notes.append(
            f"numNodes is {max(workers, 1)}, the Worker replicas: the {source.runtime} runtime runs the "
            "launcher as a node, so the TrainJob has numNodes - 1 worker pods (at least one) and the launcher, "
            "all of them in /etc/mpi/hostfile with numProcPerNode slots (v1: the workers only)"
        )
        return max(workers, 1)
    total = sum(replicas_of(source, t, specs.get(t)) for t in source.node_types)
    if total < 1:
        notes.append("numNodes is 1: the job has no replicas, and a TrainJob runs at least one node")
    return max(total, 1)


def num_proc_per_node(spec: dict[str, Any], source: Source, notes: list[str]) -> int | None:
    if source.kind == "MPIJob":
        slots = spec.get("slotsPerWorker")
        return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None
    if source.kind != "PyTorchJob":
        return None
    value = spec.get("nprocPerNode") or ((spec.get("elasticPolicy") or {}).get("nProcPerNode"))
    text = str(value if value is not None else "")
    if re.fullmatch(r"[1-9][0-9]*", text):
        return int(text)
    said = f"nprocPerNode {text!r}" if text else "nprocPerNode left out"
    notes.append(
        f"{said}: v1 hands torchrun {text or 'auto'!r}; the torch-distributed runtime sets PET_NPROC_PER_NODE "
        "to 'auto' only with a GPU in resourcesPerNode, else to its CPU count (1 without one): set "
        "trainer.numProcPerNode to choose"
    )
    return None


def pod_patch(
    rjob: str, template: dict[str, Any], container: dict[str, Any], rtype: str, notes: list[str]
) -> dict[str, Any] | None:
    """What a runtime patch carries of one v1 pod template, for the runtime's replicated job ``rjob``."""
    pod = template.get("spec") or {}
    spec = {
        key: copy.deepcopy(pod[key]) for key in PATCHABLE_POD_FIELDS if pod.get(key) not in (None, "", [], {})
    }
    node = {key: copy.deepcopy(container[key]) for key in PATCHABLE_CONTAINER_FIELDS if container.get(key)}
    if node:
        spec["containers"] = [{"name": api.NODE, **node}]
    for key in sorted(set(pod) - set(PATCHABLE_POD_FIELDS) - {"containers", "initContainers"}):
        notes.append(
            f"{rtype}: the pod's {key} is dropped: a runtime patch cannot set it; set it in a TrainingRuntime "
            "of your own"
        )
    metadata = template.get("metadata") or {}
    patch: dict[str, Any] = {}
    kept = {key: copy.deepcopy(metadata[key]) for key in ("labels", "annotations") if metadata.get(key)}
    if kept:
        patch["metadata"] = kept
    if spec:
        patch["spec"] = spec
    return {"name": rjob, "template": {"spec": {"template": patch}}} if patch else None


def runtime_patches(jobs: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """One entry, this conversion's, when a pod template had anything a patch carries."""
    replicated = [job for job in jobs if job]
    if not replicated:
        return []
    return [
        {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}}}
    ]


RUN_POLICY_NOTES = {
    "cleanPodPolicy": "there is none in v2: a finished TrainJob's pods stay until the TrainJob is deleted",
    "ttlSecondsAfterFinished": "a TrainJob has no TTL (kubeflow/trainer#2899): delete it once finished",
    "backoffLimit": "retries are the runtime's: on a built-in one a pod restarts OnFailure up to its Job's "
    "backoffLimit (Kubernetes' default, 6) and a failed Job fails the TrainJob (no JobSet failurePolicy); "
    "write a TrainingRuntime (its Jobs' backoffLimit, failurePolicy.maxRestarts) to retry otherwise",
    "schedulingPolicy": "gang scheduling is a runtime's podGroupPolicy (coscheduling or volcano) in a "
    "TrainingRuntime of your own; with Kueue, the TrainJob's kueue.x-k8s.io/queue-name label picks the queue",
}


def run_policy(spec: dict[str, Any], body: dict[str, Any], notes: list[str]) -> None:
    policy = spec.get("runPolicy") or {}
    if policy.get("suspend") is True:
        body["suspend"] = True
    deadline = policy.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
        body["activeDeadlineSeconds"] = deadline
    managed_by = policy.get("managedBy")
    if managed_by == "kueue.x-k8s.io/multikueue":
        body["managedBy"] = managed_by
    elif managed_by not in (None, "kubeflow.org/training-operator"):
        notes.append(
            f"runPolicy.managedBy {managed_by!r} is dropped: a TrainJob is managed by Trainer or MultiKueue"
        )
    for key, why in RUN_POLICY_NOTES.items():
        if policy.get(key) not in (None, {}):
            notes.append(f"runPolicy.{key} is dropped: {why}")
    if spec.get("cleanPodPolicy") is not None:
        notes.append(f"spec.cleanPodPolicy is dropped: {RUN_POLICY_NOTES['cleanPodPolicy']}")
    if spec.get("elasticPolicy"):
        notes.append(
            "elasticPolicy is dropped: Trainer v2.3 has no elastic training (removed in v2.2); the TrainJob "
            "runs numNodes nodes, no more, no fewer"
        )


def metadata_of(job: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The name, namespace, labels and annotations a user wrote; the API server's fields left out."""
    source = job.get("metadata") or {}
    metadata = {key: source[key] for key in ("name", "generateName", "namespace") if source.get(key)}
    for key in ("labels", "annotations"):
        kept = {}
        for name, value in (source.get(key) or {}).items():
            if name in DROPPED_METADATA:
                continue
            if name.startswith(OPERATOR_PREFIX):
                notes.append(
                    f"{key[:-1]} {name} is dropped: this operator's mark on the v1 job, not a TrainJob's"
                )
                continue
            kept[name] = value
        if kept:
            metadata[key] = kept
    return metadata


def restart_notes(specs: dict[str, dict[str, Any]], notes: list[str]) -> None:
    """The built-in runtimes' pods restart OnFailure (JobSet's default): another policy is lost."""
    for rtype, spec in specs.items():
        if spec.get("restartPolicy") not in (None, "OnFailure"):
            notes.append(
                f"{rtype}: restartPolicy {spec['restartPolicy']} is dropped: the runtime's pods restart "
                "OnFailure (JobSet's default), up to their Job's backoffLimit"
            )


def node_templates(specs: dict[str, dict[str, Any]], source: Source, notes: list[str]) -> dict[str, Any]:
    """The template every node is made of: the first node type's; the others' differences are lost."""
    present = [t for t in source.node_types if t in specs]
    first = (specs[present[0]].get("template") or {}) if present else {}
    for other in present[1:]:
        if (specs[other].get("template") or {}) != first:
            notes.append(
                f"the {other} template differs from the {present[0]}'s: every node of the TrainJob is made "
                f"from the {present[0]}'s"
            )
    return first


def _framework_parts(
    job: dict[str, Any], specs: dict[str, dict[str, Any]], source: Source, notes: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    """The trainer and the pod patches of a kind whose every node runs the same template."""
    wanted = (job.get("spec") or {}).get("mainContainer") or source.container
    rtype = next(t for t in source.node_types if t in specs)
    template = node_templates(specs, source, notes)
    container = main_container(template.get("spec") or {}, wanted, rtype, notes)
    trainer = trainer_of(container, source, rtype, notes)
    resources = resources_per_node(container, rtype, notes)
    if resources:
        trainer["resourcesPerNode"] = resources
    return trainer, [pod_patch(api.NODE, template, container, rtype, notes)]


def _mpi_parts(
    job: dict[str, Any], specs: dict[str, dict[str, Any]], source: Source, notes: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    """The launcher runs the Launcher's container; the worker pods, the runtime's SSH server with the
    Worker's resources and pod settings."""
    wanted = (job.get("spec") or {}).get("mainContainer") or source.container
    launcher = specs[source.launcher or ""].get("template") or {}
    launcher_container = main_container(launcher.get("spec") or {}, wanted, "Launcher", notes)
    trainer = trainer_of(launcher_container, source, "Launcher", notes)
    patches = [pod_patch(api.LAUNCHER, launcher, launcher_container, "Launcher", notes)]
    resources_from, rtype = launcher_container, "Launcher"
    worker = (specs.get("Worker") or {}).get("template")
    if worker:
        worker_container = main_container(worker.get("spec") or {}, wanted, "Worker", notes)
        if (worker_container.get("env") or []) != (launcher_container.get("env") or []):
            notes.append("Worker: its env is dropped: trainer.env (the Launcher's) goes to every node")
        patches.append(pod_patch(api.NODE, worker, worker_container, "Worker", notes))
        resources_from, rtype = worker_container, "Worker"
    resources = resources_per_node(resources_from, rtype, notes)
    if resources:
        trainer["resourcesPerNode"] = resources
    return trainer, patches


def convert(job: Any) -> Converted:
    """The TrainJob for a v1 job, with its notes; :class:`Refused` when there is none."""
    source = source_of(job)
    specs = replica_specs(job, source)
    spec = job.get("spec") or {}
    notes: list[str] = []
    parts = _mpi_parts if source.launcher else _framework_parts
    try:
        trainer, patches = parts(job, specs, source, notes)
    except Refused as refused:
        raise Refused(f"{source.kind} {name_of(job)}: {refused}") from None
    trainer["numNodes"] = num_nodes(specs, source, notes)
    nproc = num_proc_per_node(spec, source, notes)
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    body: dict[str, Any] = {
        "runtimeRef": {"name": source.runtime, "apiGroup": api.GROUP, "kind": api.CLUSTER_TRAINING_RUNTIME},
        "trainer": trainer,
    }
    patch_list = runtime_patches(patches)
    if patch_list:
        body["runtimePatches"] = patch_list
    run_policy(spec, body, notes)
    restart_notes(specs, notes)
    notes.append(source.env_change)
    trainjob = {
        "apiVersion": api.API_VERSION,
        "kind": api.TRAINJOB,
        "metadata": metadata_of(job, notes),
        "spec": body,
    }
    return Converted(trainjob=trainjob, notes=notes)


def documents(loaded: list[Any]) -> list[Any]:
    """The objects of a manifest stream: a ``kind: List`` (``kubectl get -o yaml``) gives its items,
    empty documents none."""
    found: list[Any] = []
    for doc in loaded:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            found.extend(doc["items"])
        elif doc is not None:
            found.append(doc)
    return found
