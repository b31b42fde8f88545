"""The job kinds this operator serves: one framework profile each.

A kind is known by its API version and kind together: training-operator's PaddleJob
(``kubeflow.org/v1``) and paddle-operator's (``batch.paddlepaddle.org/v1``) share a kind name.
Each profile also has a ``name``, unique and usable as an Ansible role name, which names its
role, its admission policy file and its user guide.
"""

from __future__ import annotations

from typing import Any

from training_jobs.profiles.base import Profile
from training_jobs.profiles.caffe2 import Caffe2Profile
from training_jobs.profiles.jax import JAXProfile
from training_jobs.profiles.kubeflow_paddle import KubeflowPaddleProfile
from training_jobs.profiles.mpi import MPIProfile
from training_jobs.profiles.mxnet import MXNetProfile
from training_jobs.profiles.paddle import PaddleProfile
from training_jobs.profiles.pytorch import PyTorchProfile
from training_jobs.profiles.tensorflow import TensorFlowProfile
from training_jobs.profiles.xgboost import XGBoostProfile

_ALL: tuple[Profile, ...] = (
    TensorFlowProfile(),
    MXNetProfile(),
    PyTorchProfile(),
    XGBoostProfile(),
    JAXProfile(),
    KubeflowPaddleProfile(),
    MPIProfile(),
    PaddleProfile(),
    Caffe2Profile(),
)
PROFILES: dict[str, Profile] = {p.name: p for p in _ALL}
BY_KIND: dict[tuple[str, str], Profile] = {(p.api_version, p.kind): p for p in _ALL}


def profile_for(api_version: str, kind: str) -> Profile:
    try:
        return BY_KIND[(api_version, kind)]
    except KeyError:
        known = ", ".join(f"{k} ({v})" for v, k in sorted(BY_KIND))
        raise ValueError(f"no profile for {kind!r} in {api_version!r}; known: {known}") from None


def profile_of(cr: dict[str, Any]) -> Profile:
    """The profile of a job object, by its apiVersion and kind."""
    return profile_for(cr.get("apiVersion", ""), cr.get("kind", ""))
