"""The framework profiles by job kind."""

from __future__ import annotations

from training_jobs.profiles.base import Profile
from training_jobs.profiles.caffe2 import Caffe2Profile
from training_jobs.profiles.jax import JAXProfile
from training_jobs.profiles.mxnet import MXNetProfile
from training_jobs.profiles.paddle import PaddleProfile
from training_jobs.profiles.pytorch import PyTorchProfile
from training_jobs.profiles.tensorflow import TensorFlowProfile
from training_jobs.profiles.xgboost import XGBoostProfile

PROFILES: dict[str, Profile] = {
    p.kind: p
    for p in (
        TensorFlowProfile(),
        MXNetProfile(),
        PaddleProfile(),
        Caffe2Profile(),
        PyTorchProfile(),
        XGBoostProfile(),
        JAXProfile(),
    )
}


def profile_for(kind: str) -> Profile:
    try:
        return PROFILES[kind]
    except KeyError:
        raise ValueError(f"no profile for kind {kind!r}; known: {', '.join(sorted(PROFILES))}") from None
