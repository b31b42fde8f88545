"""The torch policy: torchrun's ``PET_*`` env, the trainer's port, and torchtune's command.

Upstream sources (kubeflow/trainer v2.3.0): ``pkg/runtime/framework/plugins/torch/torch.go``
(``EnforceMLPolicy``) and ``torchtune.go``. In order, on the trainer's container ``node``: the
TrainJob's env, then ``PET_NNODES`` (the trainer's pod count), ``PET_NPROC_PER_NODE``
(``trainer.numProcPerNode``, else ``auto`` with GPUs, else the CPUs per node, at least 1),
``PET_NODE_RANK`` (the pod's completion index), and - unless the command is torchtune's
``tune run`` - ``PET_MASTER_ADDR`` (``<name>-node-0-0.<name>``) and ``PET_MASTER_PORT`` (29500);
then port 29500. ``envInjection`` targets get all five. These names differ from the v1
PyTorchJob's contract (``MASTER_ADDR``, ``WORLD_SIZE``, ``RANK``): nothing is shared with
``training_jobs.contracts.pytorch``.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.info import Info, RenderError
from trainer_jobs.resources import cpus_per_node, gpus_per_node

NNODES = "PET_NNODES"
NPROC_PER_NODE = "PET_NPROC_PER_NODE"
NODE_RANK = "PET_NODE_RANK"
MASTER_ADDR = "PET_MASTER_ADDR"
MASTER_PORT = "PET_MASTER_PORT"
RESERVED = (NNODES, NPROC_PER_NODE, NODE_RANK, MASTER_ADDR, MASTER_PORT)
TORCHTUNE = ["tune", "run"]


def proc_per_node(info: Info) -> tuple[str, int]:
    """``PET_NPROC_PER_NODE``'s value and the GPUs per node it was derived from."""
    resources = info.resources_per_node()
    gpus = gpus_per_node(resources)
    explicit = (info.trainer or {}).get("numProcPerNode")
    if explicit is not None:
        return str(int(explicit)), gpus
    if gpus == 0:
        return str(max(1, cpus_per_node(resources))), gpus
    return "auto", gpus


def master_env(name: str) -> list[dict[str, Any]]:
    return [
        {"name": MASTER_ADDR, "value": f"{name}-{api.NODE}-0-0.{name}"},
        {"name": MASTER_PORT, "value": str(api.TRAINER_PORT)},
    ]


def enforce(info: Info) -> None:
    if info.ml_policy is None or not isinstance(info.ml_policy.get("torch"), dict):
        return
    trainer_ps = info.trainer_pod_set()
    num_nodes = (info.trainer or {}).get("numNodes")
    if trainer_ps is not None and num_nodes is not None:
        trainer_ps.count = int(num_nodes)
    nproc, gpus = proc_per_node(info)
    pet: list[dict[str, Any]] = [
        {"name": NNODES, "value": str(trainer_ps.count if trainer_ps else 1)},
        {"name": NPROC_PER_NODE, "value": nproc},
        {"name": NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": api.COMPLETION_INDEX_FIELD}}},
    ]
    node = info.trainer_container() if info.trainer is not None else None
    if node is not None:
        upsert.upsert_env(node, upsert.env_vars((info.trainer or {}).get("env")))
        upsert.upsert_env(node, pet)
        if info.command != TORCHTUNE:
            upsert.upsert_env(node, master_env(info.name))
        else:
            info.command = [*TORCHTUNE, *torchtune_arguments(info, nproc, gpus)]
        upsert.upsert_ports(node, [{"containerPort": api.TRAINER_PORT}])
    _inject_targets(info, pet)


def _inject_targets(info: Info, pet: list[dict[str, Any]]) -> None:
    """``envInjection.targets``: the same variables, master address included, in other containers."""
    injection = (info.ml_policy or {}).get("torch", {}).get("envInjection") or {}
    for target in injection.get("targets") or []:
        for container_name in target.get("containerNames") or []:
            rjob = info.rjob(target.get("jobName", ""))
            found = upsert.container(rjob, container_name, init_too=True) if rjob is not None else None
            if found is None:
                raise RenderError(
                    f"envInjection target podSet {target.get('jobName', '')!r} container {container_name!r} not found in runtime template"
                )
            upsert.upsert_env(found, pet)
            upsert.upsert_env(found, master_env(info.name))


def torchtune_arguments(info: Info, nproc: str, gpus: int) -> list[str]:
    """What upstream appends to ``tune run``: the rendezvous endpoint (several nodes or
    processes), the recipe and its config, then the runtime's immutable configs."""
    trainer_ps = info.trainer_pod_set()
    nodes = trainer_ps.count if trainer_ps else 1
    args: list[str] = []
    several = gpus > 1 if nproc == "auto" else int(nproc) > 1
    if nodes > 1 or several:
        args.append(f"--rdzv_endpoint={info.name}-{api.NODE}-0-0.{info.name}:{api.TRAINER_PORT}")
    recipe, config = recipe_and_config(info, nodes, nproc, gpus)
    return [*args, recipe, "--config", config, *runtime_overrides(info)]


def _bool_arg(args: list[str], item: str) -> bool:
    """``isBoolArgEnabled``: a ``key=value`` argument whose key contains ``item``, value true."""
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and item in key and value.strip().lower() == "true":
            return True
    return False


def _qlora(args: list[str]) -> bool:
    return not _bool_arg(args, "model.use_dora") and _bool_arg(args, "model.quantize_base")


def _lora(args: list[str]) -> bool:
    return any("model.lora_attn_modules" in arg for arg in args)


def model_of(runtime_name: str) -> str:
    """``getModelFromRuntimeRef``: ``torchtune-llama3.2-1b`` -> ``llama3_2/1B``."""
    fields = runtime_name.split("-")
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}" if len(fields) == 3 else ""


def recipe_and_config(info: Info, nodes: int, nproc: str, gpus: int) -> tuple[str, str]:
    """``getRecipeAndConfig``."""
    args = list((info.trainer or {}).get("args") or [])
    recipe, suffix = "full_finetune_distributed", "_full"
    single = nproc == "1" or gpus == 1
    if nodes == 1 and single:
        if _qlora(args):
            recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
        elif _lora(args):
            recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
        else:
            recipe, suffix = "full_finetune_single_device", "_full_single_device"
    elif nodes == 1 and _qlora(args):
        recipe, suffix = "lora_finetune_distributed", "_qlora"
    elif nodes == 1 and _lora(args):
        recipe, suffix = "lora_finetune_distributed", "_lora"
    elif nodes > 1:
        suffix = "_full_multinode"
    return recipe, f"{model_of(api.runtime_ref(info.trainjob)[2])}{suffix}"


IMMUTABLE_CONFIGS = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")


def runtime_overrides(info: Info) -> list[str]:
    """``extractOverridesFromRuntime``: the trainer's template command items that set an
    immutable config (``output_dir=...``)."""
    found: list[str] = []
    for rjob in info.rjobs():
        if upsert.ancestor(rjob) != api.ANCESTOR_TRAINER:
            continue
        for c in upsert.pod_spec(rjob).get("containers") or []:
            if c.get("name") == api.NODE:
                found += [item for item in c.get("command") or [] if item.split("=")[0] in IMMUTABLE_CONFIGS]
    return found
