"""What upstream calls the runtime info: the runtime's JobSet template merged with the TrainJob.

``newRuntimeInfo`` (``pkg/runtime/core/trainingruntime.go``, v2.3.0): the JobSet's labels and
annotations are the template's with every runtime patch's ``template.metadata`` on top; the
template's spec gets every runtime patch merged (:mod:`trainer_jobs.merge`); the container
``node`` of the trainer's replicated job (and, for MPI with ``runLauncherAsNode``, of the job
named ``node``) gets ``trainer.resourcesPerNode`` merged into its resources; and each replicated
job becomes a pod set: its name, its ancestor mark, how many pods it runs (``parallelism``, or
``mlPolicy.numNodes`` for the trainer) and what one pod requests. The framework policies then
change this info (:mod:`trainer_jobs.policies`) before the JobSet is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.merge import apply_runtime_patches, patched_metadata
from trainer_jobs.resources import (
    ResourceList,
    canonical_pod_spec,
    merge_requirements,
    pod_requests,
    runtime_resources_per_node,
)
from trainer_jobs.typed import omit_empty


class RenderError(Exception):
    """The objects cannot be built (upstream's ``NewObjects`` returns an error)."""


@dataclass
class PodSet:
    name: str
    ancestor: str | None
    count: int
    requests: ResourceList
    # The replicated job's replicas in the template (its pods' host names count them).
    replicas: int = 1


@dataclass
class Info:
    trainjob: dict[str, Any]
    labels: dict[str, str] | None
    annotations: dict[str, str] | None
    ml_policy: dict[str, Any] | None
    mpi: dict[str, Any] | None
    pod_group_policy: dict[str, Any]
    spec: dict[str, Any]
    pod_sets: list[PodSet]
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    # spec.trainer.command as the trainer container gets it (torchtune extends it).
    command: list[str] | None = None

    @property
    def name(self) -> str:
        return str(api.meta(self.trainjob).get("name", ""))

    @property
    def trainer(self) -> dict[str, Any] | None:
        return api.trainer(self.trainjob)

    def rjobs(self) -> list[dict[str, Any]]:
        return self.spec.get("replicatedJobs") or []

    def pod_set(self, name: str) -> PodSet | None:
        return next((ps for ps in self.pod_sets if ps.name == name), None)

    def trainer_pod_set(self) -> PodSet | None:
        """``FindPodSetByAncestor(trainer)``: the first pod set marked as the trainer."""
        return next((ps for ps in self.pod_sets if ps.ancestor == api.ANCESTOR_TRAINER), None)

    def rjob(self, name: str) -> dict[str, Any] | None:
        return next((rj for rj in self.rjobs() if rj.get("name") == name), None)

    def trainer_container(self) -> dict[str, Any] | None:
        """Container ``node`` of the trainer's pod set (not its init containers)."""
        ps = self.trainer_pod_set()
        rjob = self.rjob(ps.name) if ps else None
        return upsert.container(rjob, api.NODE) if rjob is not None else None

    def endpoints(self, ps: PodSet) -> list[str]:
        """``IdentifyPodNetwork``: the host names of the pod set's pods,
        ``<name>-<job>-<replica>-<pod>.<subdomain>`` (the subdomain is the TrainJob's name
        unless the template's ``network.subdomain`` says otherwise)."""
        subdomain = (self.spec.get("network") or {}).get("subdomain") or self.name
        return [
            f"{self.name}-{ps.name}-{replica}-{pod}.{subdomain}"
            for replica in range(ps.replicas)
            for pod in range(ps.count)
        ]

    def resources_per_node(self) -> dict[str, Any]:
        """The trainer's resources per node: the TrainJob's ``resourcesPerNode``, else the
        runtime's (``ExtractResourcePerNodeFromRuntime``)."""
        per_node = (self.trainer or {}).get("resourcesPerNode")
        if isinstance(per_node, dict):
            return per_node
        return runtime_resources_per_node(self.spec) or {}

    def launcher_as_node(self) -> bool:
        return bool(self.mpi and self.mpi.get("runLauncherAsNode"))


def runtime_info(trainjob: dict[str, Any], runtime: dict[str, Any]) -> Info:
    """The info upstream builds before its plugins run (``newRuntimeInfo``)."""
    template = (runtime.get("spec") or {}).get("template") or {}
    patches = api.spec(trainjob).get("runtimePatches") or []
    template_meta = template.get("metadata") or {}
    info = Info(
        trainjob=trainjob,
        labels=patched_metadata(template_meta, patches, "labels"),
        annotations=patched_metadata(template_meta, patches, "annotations"),
        ml_policy=api.ml_policy(runtime),
        mpi=api.mpi_policy(runtime),
        pod_group_policy=api.pod_group_policy(runtime),
        spec=apply_runtime_patches(omit_empty(template.get("spec") or {}), patches),
        pod_sets=[],
        command=info_command(trainjob),
    )
    for rjob in info.rjobs():
        if not isinstance(rjob.get("name"), str):
            raise RenderError("runtime template has a replicatedJob without a name")
        info.pod_sets.append(_pod_set(info, rjob))
    return info


def info_command(trainjob: dict[str, Any]) -> list[str] | None:
    command = (api.trainer(trainjob) or {}).get("command")
    return list(command) if isinstance(command, list) else None


def _pod_set(info: Info, rjob: dict[str, Any]) -> PodSet:
    pod = upsert.pod_spec(rjob)
    count = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism", 1))
    mark = upsert.ancestor(rjob)
    is_trainer = mark == api.ANCESTOR_TRAINER and info.ml_policy is not None
    if is_trainer:
        count = int((info.ml_policy or {}).get("numNodes", 1))
    per_node = (info.trainer or {}).get("resourcesPerNode")
    launcher_node = info.launcher_as_node() and rjob["name"] == api.NODE
    if isinstance(per_node, dict) and (is_trainer or launcher_node):
        node = upsert.container(rjob, api.NODE)
        if node is not None:
            node["resources"] = merge_requirements(node.get("resources"), per_node)
    canonical_pod_spec(pod)
    return PodSet(
        name=rjob["name"],
        ancestor=mark,
        count=max(count, 1),
        requests=pod_requests(pod),
        replicas=int(rjob.get("replicas", 1)),
    )
