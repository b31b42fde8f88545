"""The CEL of Trainer's admission policies (gen_crds.trainer_admission): upstream v2.3's webhook
checks of a TrainJob (pkg/runtime/framework/plugins/*/Validate) and of a runtime
(pkg/webhooks), each with a message that says what to change."""

from __future__ import annotations

from typing import Any

from .admission import validation

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
SUPPORT = "trainer.kubeflow.org/support"
DEPRECATION_POLICY = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)
QUEUE = "scheduling.volcano.sh/queue-name"
# What each framework sets in the node container (upstream's *ReservedEnvNames).
RESERVED_ENV = {
    "torch": ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"],
    "mpi": [
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    ],
    "xgboost": ["DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"],
}
# The container each step's replicated job must have (upstream's expectedContainerNames).
STEP_CONTAINERS = {
    "trainer": "node",
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}
PATCHES = "object.?spec.?runtimePatches.orValue([])"
RUNTIME = "'runtime ' + params.metadata.name"


def cel_list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def pod(job: str, field: str) -> str:
    """CEL: the ``field`` list (containers, initContainers) of a replicated job's pod template, or []."""
    return f"{job}.?template.?spec.?template.?spec.?{field}.orValue([])"


def has_container(job: str, name: str) -> str:
    """CEL: the runtime's replicated job ``job`` has a container or init container named ``name``."""
    return f"({pod(job, 'containers')}.exists(x, x.name == {name}) || {pod(job, 'initContainers')}.exists(x, x.name == {name}))"


def patched_jobs(p: str) -> str:
    return f"{p}.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])"


def runtime_variables() -> list[dict[str, str]]:
    reserved = "{" + ", ".join(f"'{k}': {cel_list(v)}" for k, v in RESERVED_ENV.items()) + "}"
    framework = " : ".join(f"variables.policy.?{k}.hasValue() ? '{k}'" for k in RESERVED_ENV) + " : ''"
    queues = (
        f"{PATCHES}.filter(p, p.?trainingRuntimeSpec.?template.?metadata.?annotations[?'{QUEUE}'].hasValue())"
        f".map(p, p.trainingRuntimeSpec.template.metadata.annotations['{QUEUE}'])"
    )
    return [
        {"name": "policy", "expression": "params.?spec.?mlPolicy"},
        {"name": "framework", "expression": framework},
        {"name": "reserved", "expression": f"{reserved}[?variables.framework].orValue([])"},
        {"name": "envNames", "expression": "object.?spec.?trainer.?env.orValue([]).map(e, e.name)"},
        {"name": "jobs", "expression": "params.?spec.?template.?spec.?replicatedJobs.orValue([])"},
        # The Volcano queue annotations of the patches: the last one wins over the runtime's.
        {"name": "patchQueues", "expression": queues},
    ]


def reserved_env_validation() -> dict[str, Any]:
    bad = "variables.envNames.filter(n, n in variables.reserved)"
    return validation(
        "!variables.envNames.exists(n, n in variables.reserved)",
        "spec.trainer.env must not set the variables the runtime's framework sets (PET_*, OMPI_MCA_*, "
        "DMLC_*): remove them",
        f"'spec.trainer.env must not set ' + {bad}.join(', ') + ': the ' + variables.framework + ' ' + "
        f"{RUNTIME} + ' sets them; remove them'",
    )


def mpi_launcher_validation() -> dict[str, Any]:
    both = "variables.jobs.exists(j, j.name == 'launcher') && variables.jobs.exists(j, j.name == 'node')"
    return validation(
        "!variables.policy.?mpi.?runLauncherAsNode.orValue(false) || "
        f"object.?spec.?trainer.?numNodes.orValue(1) < 2 || ({both})",
        "spec.trainer.numNodes must be 1: the MPI runtime runs its launcher as a node but has no launcher "
        "or no node job; use one node or another runtime",
        f"'spec.trainer.numNodes must be 1: the MPI ' + {RUNTIME} + ' runs its launcher as a node but "
        "has no launcher or no node job; use one node or another runtime'",
    )


def flux_validations() -> list[dict[str, Any]]:
    procs = "object.?spec.?trainer.?numProcPerNode.orValue(variables.policy.?flux.?numProcPerNode.orValue(1))"
    installer = f"variables.jobs.exists(j, j.name == 'node' && {pod('j', 'initContainers')}.exists(c, c.name == 'flux-installer'))"
    return [
        validation(
            f"!variables.policy.?flux.hasValue() || {procs} >= 1",
            "spec.trainer.numProcPerNode must be at least 1 for a Flux runtime: raise it",
            f"'spec.trainer.numProcPerNode must be at least 1 for the Flux ' + {RUNTIME} + ': raise it'",
        ),
        validation(
            f"!variables.policy.?flux.hasValue() || !{installer}",
            "the Flux runtime's node job must not have an init container named flux-installer, which the "
            "operator adds: rename it in the runtime",
            f"'the Flux ' + {RUNTIME} + ' must not have an init container named flux-installer in its node "
            "job, which the operator adds: rename it in the runtime'",
        ),
    ]


def env_injection_validation() -> dict[str, Any]:
    found = f"variables.jobs.exists(j, j.name == t.jobName && {has_container('j', 'n')})"
    targets = "variables.policy.?torch.?envInjection.?targets.orValue([])"
    return validation(
        f"{targets}.all(t, t.containerNames.all(n, {found}))",
        "the torch runtime's mlPolicy.torch.envInjection names a container its template lacks: fix the runtime",
        f"{targets}.filter(t, !t.containerNames.all(n, {found})).map(t, 'spec.runtimeRef: the torch ' + "
        f"{RUNTIME} + ' injects PET_* into container ' + t.containerNames.filter(n, !{found})[0] + "
        "' of job ' + t.jobName + ', which its template lacks; fix mlPolicy.torch.envInjection of the runtime')[0]",
    )


def initializer_validation(step: str) -> dict[str, Any]:
    job = f"{step}-initializer"
    mounted = f"{pod('j', 'containers')}.exists(c, c.name == '{job}' && c.?volumeMounts.orValue([]).exists(m, m.name == 'initializer'))"
    missing = (
        f"!variables.jobs.exists(j, j.name == '{job}') ? 'has no {job} job' : "
        f"!variables.jobs.exists(j, j.name == '{job}' && {has_container('j', repr(job))}) ? "
        f"'has no container {job} in its {job} job' : "
        f"'has no volumeMount initializer in container {job} of its {job} job'"
    )
    return validation(
        f"!object.?spec.?initializer.?{step}.hasValue() || variables.jobs.exists(j, j.name == '{job}' && {mounted})",
        f"spec.initializer.{step} needs a runtime with a {job} job whose {job} container mounts the volume "
        f"initializer: use such a runtime or remove spec.initializer.{step}",
        f"'spec.initializer.{step}: ' + {RUNTIME} + ' ' + ({missing}) + '; use a runtime that has it or remove "
        f"spec.initializer.{step}'",
    )


def patch_validations() -> list[dict[str, Any]]:
    known = "variables.jobs.exists(j, j.name == r.name)"
    unknown_job = f"{PATCHES}.map(p, {patched_jobs('p')}.filter(r, !{known}).map(r, 'runtimePatches ' + p.manager + ' patches job ' + r.name))"
    out = [
        validation(
            f"{PATCHES}.all(p, {patched_jobs('p')}.all(r, {known}))",
            "spec.runtimePatches must not patch a replicated job the runtime does not have: fix the job name",
            f"{unknown_job}.filter(l, size(l) > 0)[0][0] + ', which ' + {RUNTIME} + ' does not have; fix the "
            "job name'",
        )
    ]
    for field, what in (("containers", "a container"), ("initContainers", "an init container")):
        exists = f"variables.jobs.exists(j, j.name == r.name && {has_container('j', 'c.name')})"
        ok = f"!{known} || {pod('r', field)}.all(c, {exists})"
        bad = (
            f"{PATCHES}.map(p, {patched_jobs('p')}.filter(r, !({ok})).map(r, 'runtimePatches ' + p.manager + "
            f"' patches {what} ' + {pod('r', field)}.filter(c, !{exists})[0].name + ' of job ' + r.name))"
        )
        out.append(
            validation(
                f"{PATCHES}.all(p, {patched_jobs('p')}.all(r, {ok}))",
                f"spec.runtimePatches must not patch {what} the runtime's job does not have: fix the "
                "container name",
                f"{bad}.filter(l, size(l) > 0)[0][0] + ', which ' + {RUNTIME} + ' does not have; fix the "
                "container name'",
            )
        )
    return out


def volcano_queue_validation() -> dict[str, Any]:
    runtime_queue = f"params.?spec.?template.?metadata.?annotations[?'{QUEUE}'].orValue('unset')"
    queue = f"(size(variables.patchQueues) > 0 ? variables.patchQueues[size(variables.patchQueues) - 1] : {runtime_queue})"
    return validation(
        f"!params.?spec.?podGroupPolicy.?volcano.hasValue() || {queue} != ''",
        f"the Volcano queue (annotation {QUEUE} of the JobSet template) must not be empty: name a queue or "
        "remove the annotation",
        f"'the Volcano queue of ' + {RUNTIME} + ' (annotation {QUEUE} of the JobSet template, or of a "
        "runtime patch) must not be empty: name a queue or remove the annotation'",
    )


def trainjob_runtime_validations() -> list[dict[str, Any]]:
    """A TrainJob against the runtime it names (params)."""
    return [
        reserved_env_validation(),
        mpi_launcher_validation(),
        *flux_validations(),
        env_injection_validation(),
        initializer_validation("dataset"),
        initializer_validation("model"),
        *patch_validations(),
        volcano_queue_validation(),
    ]


def trainjob_validations() -> list[dict[str, Any]]:
    """A TrainJob alone: what upstream's webhook checks without the runtime."""
    steps = cel_list(list(STEP_CONTAINERS.values()))
    env_set = (
        f"{PATCHES}.exists(p, {patched_jobs('p')}.exists(r, {pod('r', 'containers')}.exists(c, "
        f"c.name in {steps} && size(c.?env.orValue([])) > 0)))"
    )
    old = "oldObject.?spec.?runtimePatches.orValue([])"
    suspended = "object.?spec.?suspend.orValue(false) || oldObject.?spec.?suspend.orValue(false)"
    return [
        validation(
            "has(object.spec)",
            "spec.runtimeRef is required: name the runtime (e.g. torch-distributed)",
            "'spec.runtimeRef is required: name the runtime (e.g. torch-distributed)'",
        ),
        validation(
            f"request.operation != 'UPDATE' || {PATCHES} == {old} || {suspended}",
            "spec.runtimePatches can change only while the TrainJob is suspended (before or after the "
            "change): set spec.suspend to true first",
            "'spec.runtimePatches can change only while the TrainJob is suspended (before or after the "
            "change): set spec.suspend to true first'",
        ),
        validation(
            f"!{env_set}",
            "spec.runtimePatches must not set env of the node, dataset-initializer or model-initializer "
            "containers: use spec.trainer.env or spec.initializer.*.env",
            "'spec.runtimePatches must not set env of the node, dataset-initializer or model-initializer "
            "containers: use spec.trainer.env or spec.initializer.*.env'",
        ),
    ]


def step_job_validations() -> list[dict[str, Any]]:
    """A runtime's replicated jobs marked as a TrainJob step (upstream's validateReplicatedJobs)."""
    jobs = "object.?spec.?template.?spec.?replicatedJobs.orValue([])"
    step = f"j.template.?metadata.?labels[?'{ANCESTOR}'].orValue('')"
    steps = cel_list(list(STEP_CONTAINERS))
    wanted = "{" + ", ".join(f"'{k}': '{v}'" for k, v in STEP_CONTAINERS.items()) + "}"
    too_many = f"{step} in {steps} && j.?replicas.orValue(1) != 1"
    lacks = f"{step} in {steps} && !{pod('j', 'containers')}.exists(c, c.name == {wanted}[{step}])"
    where = "'spec.template.spec.replicatedJobs ' + j.name"
    return [
        validation(
            f"!{jobs}.exists(j, {too_many})",
            "a replicated job of a TrainJob step (trainer, dataset-initializer, model-initializer) must have "
            "replicas 1: set replicas to 1 (numNodes sizes the trainer)",
            f"{jobs}.filter(j, {too_many}).map(j, {where} + ' is the ' + {step} + ' step: its replicas must be 1; "
            "set replicas to 1 (numNodes sizes the trainer)')[0]",
        ),
        validation(
            f"!{jobs}.exists(j, {lacks})",
            "a replicated job of a TrainJob step must have its container: node (trainer), dataset-initializer "
            "or model-initializer; add or rename the container",
            f"{jobs}.filter(j, {lacks}).map(j, {where} + ' is the ' + {step} + ' step: it must have a container "
            f"named ' + {wanted}[{step}] + '; add or rename the container')[0]",
        ),
    ]


def deprecated_runtime_validation(what: str, runtime: str = "params") -> dict[str, Any]:
    """A warning (its binding's action is Warn) for a runtime labelled deprecated, as upstream's."""
    text = "is deprecated and will be removed in a future release of Kubeflow Trainer."
    see = f"See runtime deprecation policy: {DEPRECATION_POLICY}"
    return validation(
        f"{runtime}.metadata.?labels[?'{SUPPORT}'].orValue('') != 'deprecated'",
        f"{what} {text} {see}",
        f"'{what} \"' + {runtime}.metadata.name + '\" {text} ' + '{see}'",
    )
