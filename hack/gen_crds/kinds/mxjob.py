"""An MXNet training or tuning job: training-operator v1.8's MXJob."""

from __future__ import annotations

from ..kind import Kind
from ..schema import rule, string
from .kubeflow import kubeflow_kind

MX_TYPES = ["Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"]


def mxjob() -> Kind:
    distributed = (
        "self.jobMode == 'MXTrain' && "
        "('Server' in self.mxReplicaSpecs || "
        "('Worker' in self.mxReplicaSpecs && self.mxReplicaSpecs['Worker'].replicas > 1))"
    )
    return kubeflow_kind(
        "MXJob",
        "mxReplicaSpecs",
        MX_TYPES,
        "mxnet",
        "A distributed MXNet training or tuning job (training-operator v1.8 / mxnet-operator "
        "compatible). Every container gets MX_CONFIG and the DMLC_* variables.",
        [
            rule(
                "!('Scheduler' in self) || self['Scheduler'].replicas == 1",
                "spec.mxReplicaSpecs.Scheduler.replicas must be 1: MXNet has exactly one scheduler "
                "(<job>-scheduler-0)",
            ),
        ],
        spec_rules=[
            rule(
                f"!({distributed}) || 'Scheduler' in self.mxReplicaSpecs",
                "a distributed MXJob (jobMode MXTrain with a Server or more than one Worker) needs exactly one "
                "scheduler: add spec.mxReplicaSpecs.Scheduler with replicas: 1",
            ),
        ],
        lead={
            "jobMode": string(
                "MXTrain: distributed training with Scheduler, Server and Worker. MXTune: TVM "
                "auto-tuning with TunerTracker, TunerServer and Tuner. Cannot be changed after creation.",
                enum=["MXTrain", "MXTune"],
                default="MXTrain",
                rules=[
                    rule(
                        "self == oldSelf",
                        "spec.jobMode is immutable: recreate the job to change the mode",
                    )
                ],
            ),
        },
        short_names=["mxj"],
    )
