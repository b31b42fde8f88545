"""``render``: what Kubeflow Trainer v2.3.0's controller builds for a TrainJob on a runtime.

Upstream's ``TrainingRuntime.NewObjects`` (``pkg/runtime/core``), run by its ``trainjob``
controller: build the runtime info (:mod:`trainer_jobs.info`: the template, the runtime patches,
``resourcesPerNode``), enforce the ML policy (:mod:`trainer_jobs.policies`: torch, MPI, JAX,
XGBoost or plain ML) and the pod-group policy (:mod:`trainer_jobs.podgroups`), then build the
JobSet (:mod:`trainer_jobs.jobset`), MPI's ConfigMap and Secret and the PodGroup. Pure: the
TrainJob and the runtime in, plain objects out; what to do with them (create, re-apply while
suspended, leave alone) is :mod:`trainer_jobs.plan`'s.

Deliberate differences from upstream, all where upstream's output is not a function of its
input or where the engine cannot do what it does:

| upstream | here | why |
| --- | --- | --- |
| XGBoost: the TrainJob's env before or after ``DMLC_*``, by Go map order | always before | a render is a function of its input |
| ``GetNumGPUPerNode``: any resource named like "gpu", by map order | the first by name | same |
| the MPI Secret's ECDSA P-521 keys generated in the build | ``data`` left to the apply step (``mpi.ssh_auth_data``) | no cryptography in the engine |
| ``mlPolicy.flux``: Flux's installer init container and scripts | :class:`RenderError` (not supported) | not built yet; the issue's runtimes do not use it |
| Go's typed round trip drops a ``false`` of a non-pointer ``bool`` in the template | kept | the engine has no Go types; no built-in runtime has one |
| the runtime snapshot ConfigMap's ``data.runtime`` is YAML | JSON (which is YAML, and upstream's reader parses it) | the engine has no YAML writer (:mod:`trainer_jobs.snapshot`) |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_jobs import api, jobset, podgroups
from trainer_jobs.info import Info, RenderError, runtime_info
from trainer_jobs.policies import jax, mpi, plain, torch, xgboost

__all__ = ["RenderError", "Rendered", "render", "render_info"]


@dataclass
class Rendered:
    """What upstream would apply for a TrainJob, besides the runtime snapshot."""

    jobset: dict[str, Any]
    pod_groups: list[dict[str, Any]] = field(default_factory=list)
    hostfile: dict[str, Any] | None = None
    ssh_secret: dict[str, Any] | None = None

    def extras(self) -> list[dict[str, Any]]:
        """Everything but the JobSet, in upstream's order of building."""
        objects = [*self.pod_groups]
        if self.ssh_secret is not None:
            objects.append(self.ssh_secret)
        if self.hostfile is not None:
            objects.append(self.hostfile)
        return objects


def render_info(trainjob: dict[str, Any], runtime: dict[str, Any]) -> Info:
    """The runtime info after every policy (``RuntimeInfo``): the JobSet before its build."""
    if isinstance((api.ml_policy(runtime) or {}).get("flux"), dict):
        raise RenderError("mlPolicy.flux is not supported by this operator")
    info = runtime_info(trainjob, runtime)
    for policy in (torch, mpi, jax, plain, xgboost):
        policy.enforce(info)
    podgroups.enforce(info)
    jobset.sync_parallel_count(info)
    return info


def render(trainjob: dict[str, Any], runtime: dict[str, Any]) -> Rendered:
    """The JobSet and the other objects upstream builds; :class:`RenderError` when it cannot."""
    info = render_info(trainjob, runtime)
    rendered = Rendered(jobset=jobset.build(info), pod_groups=podgroups.pod_groups(info))
    if info.mpi is not None:
        rendered.hostfile = mpi.hostfile_config_map(info)
        rendered.ssh_secret = mpi.ssh_auth_secret(trainjob)
    return rendered
