"""The JobSet upstream builds from the runtime info (``pkg/runtime/framework/plugins/jobset``, v2.3.0).

In ``Build``'s order: every pod set's pod count becomes its job's ``parallelism`` and
``completions`` (``SyncParallelCount``); the initializers get ``STORAGE_URI``, their env and
their Secret (``envFrom``) in their container of the same name, and ``replicas: 1``; the
trainer's job gets ``replicas: 1`` and, in its container ``node``, the TrainJob's image, command
and args; the TrainJob's env goes into that container (and, with MPI's ``runLauncherAsNode``,
into container ``node`` of the job named ``node``); the schedulers' pod labels and annotations
go on every pod template; ``suspend`` is the TrainJob's. The JobSet is named as the TrainJob,
owned by it, and labelled and annotated as the runtime's template metadata with the runtime
patches' on top.
"""

from __future__ import annotations

import copy
from typing import Any

from trainer_jobs import api, typed, upsert
from trainer_jobs.info import Info


def sync_parallel_count(info: Info) -> None:
    for ps in info.pod_sets:
        rjob = info.rjob(ps.name)
        if rjob is not None:
            job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
            job_spec["parallelism"] = ps.count
            job_spec["completions"] = ps.count


def _initializer(info: Info, rjob: dict[str, Any], which: str) -> None:
    rjob["replicas"] = 1
    config = (api.spec(info.trainjob).get("initializer") or {}).get(
        "dataset" if which == api.DATASET_INITIALIZER else "model"
    )
    if not isinstance(config, dict):
        return
    for container in upsert.pod_spec(rjob).get("containers") or []:
        if container.get("name") != which:
            continue
        if config.get("storageUri") is not None:
            upsert.upsert_env(container, [{"name": api.STORAGE_URI, "value": config["storageUri"]}])
        upsert.upsert_env(container, upsert.env_vars(config.get("env")))
        secret = config.get("secretRef")
        if isinstance(secret, dict):
            container["envFrom"] = [
                *(container.get("envFrom") or []),
                {"secretRef": {"name": secret.get("name", "")}},
            ]


def initializers(info: Info) -> None:
    for rjob in info.rjobs():
        mark = upsert.ancestor(rjob)
        if mark in (api.DATASET_INITIALIZER, api.MODEL_INITIALIZER):
            _initializer(info, rjob, mark)


def trainer(info: Info) -> None:
    """``Builder.Trainer``: the TrainJob's image, command, args and env."""
    spec = info.trainer
    for rjob in info.rjobs():
        is_trainer = upsert.ancestor(rjob) == api.ANCESTOR_TRAINER
        if is_trainer:
            rjob["replicas"] = 1
        if spec is None:
            continue
        nodes = [c for c in upsert.pod_spec(rjob).get("containers") or [] if c.get("name") == api.NODE]
        for node in nodes if is_trainer else []:
            _set_or_drop(node, "image", spec.get("image"))
            if isinstance(info.command, list):
                _set_or_drop(node, "command", info.command)
            if isinstance(spec.get("args"), list):
                _set_or_drop(node, "args", spec["args"])
        if is_trainer or (info.launcher_as_node() and rjob.get("name") == api.NODE):
            for node in nodes:
                upsert.upsert_env(node, upsert.env_vars(spec.get("env")))


def _set_or_drop(container: dict[str, Any], field: str, value: Any) -> None:
    """A value the TrainJob sets replaces the template's; an empty one clears it (Go omits it)."""
    if value is None:
        return
    if value in ([], ""):
        container.pop(field, None)
    else:
        container[field] = list(value) if isinstance(value, list) else value


def pod_metadata(info: Info) -> None:
    """``PodLabels`` and ``PodAnnotations``: the schedulers' marks on every pod template."""
    for rjob in info.rjobs():
        template = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        for field, values in (("labels", info.pod_labels), ("annotations", info.pod_annotations)):
            if values:
                metadata = template.setdefault("metadata", {})
                metadata[field] = {**(metadata.get(field) or {}), **values}


def build(info: Info) -> dict[str, Any]:
    """The JobSet, from an info the policies have enforced and whose pod sets are synced."""
    initializers(info)
    trainer(info)
    pod_metadata(info)
    spec = dict(info.spec)
    typed.struct_defaults(spec)
    suspend = api.spec(info.trainjob).get("suspend")
    if suspend is None:
        spec.pop("suspend", None)
    else:
        spec["suspend"] = suspend
    metadata = api.owned_metadata(info.trainjob, info.name)
    if info.labels:
        metadata["labels"] = dict(info.labels)
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    return {"apiVersion": api.JOBSET_API_VERSION, "kind": api.JOBSET, "metadata": metadata, "spec": spec}


def for_reapply(jobset: dict[str, Any]) -> dict[str, Any]:
    """The JobSet as applied again over the one that exists: without the empty ``metadata`` of a
    pod template. Server-side apply stores an applied ``{}`` whose fields this manager owned (the
    labels and annotations of a runtime patch taken back, Kueue's at a preemption) as null,
    which the JobSet CRD refuses (``must be of type object``); left out, those fields are
    removed all the same."""
    out = copy.deepcopy(jobset)
    for rjob in out["spec"].get("replicatedJobs") or []:
        pod_template = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        if pod_template.get("metadata") == {}:
            del pod_template["metadata"]
    return out
