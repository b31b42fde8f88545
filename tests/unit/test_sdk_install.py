"""Both Kubeflow SDKs of the venv import side by side: kubeflow-training (v1, TrainingClient) and
kubeflow (Trainer v2, TrainerClient). Both wheels ship kubeflow/__init__.py; pip keeps one of the
two, and the other SDK must still import through it."""

from __future__ import annotations

from importlib.metadata import version

import pytest


# The SDK's own pydantic models still use class-based config (its code, not ours).
@pytest.mark.filterwarnings("ignore:Support for class-based `config` is deprecated:DeprecationWarning")
def test_trainer_v2_sdk_imports_beside_the_v1_sdk():
    from kubeflow.trainer import CustomTrainer, CustomTrainerContainer, TrainerClient
    from kubeflow.training import TrainingClient

    assert callable(TrainerClient.train) and callable(TrainingClient.create_job)
    assert CustomTrainer.__module__ == CustomTrainerContainer.__module__ == "kubeflow.trainer.types.types"


def test_sdk_versions_are_the_ones_issue_36_targets():
    assert (version("kubeflow"), version("kubeflow-trainer-api")) == ("0.5.0", "2.3.0")
    assert int(version("kubernetes").split(".")[0]) < 36
