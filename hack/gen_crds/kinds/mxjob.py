"""An MXNet training or tuning job: training-operator v1.8's MXJob."""

from __future__ import annotations

from ..common import ReplicaKeys
from ..kind import Kind
from ..schema import rule, string
from .kubeflow import kubeflow_kind

MX_TYPES = ["Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"]


def mxjob() -> Kind:
    # training-operator v1.8's webhook only warns, its validation does not check the keys, and
    # its defaulter (setMXNetTypeNamesToCamelCase, as mxnet-operator's setTypeNamesToCamelCase)
    # renames Scheduler, Server and Worker from any case, but not the tuner types.
    keys = ReplicaKeys(MX_TYPES, folded=["Scheduler", "Server", "Worker"])
    specs = "self.mxReplicaSpecs"
    many_workers = f"{specs}.exists(k, {keys.names('k', ['Worker'])} && {specs}[k].replicas > 1)"
    distributed = f"self.jobMode == 'MXTrain' && ({keys.has('Server', specs)} || {many_workers})"
    return kubeflow_kind(
        "MXJob",
        "mxReplicaSpecs",
        MX_TYPES,
        "mxnet",
        "A distributed MXNet training or tuning job (training-operator v1.8 / mxnet-operator "
        "compatible). Every container gets MX_CONFIG and the DMLC_* variables.",
        [
            rule(
                f"self.all(k, !({keys.names('k', ['Scheduler'])}) || self[k].replicas == 1)",
                "spec.mxReplicaSpecs.Scheduler.replicas must be 1: MXNet has exactly one scheduler "
                "(<job>-scheduler-0)",
            ),
        ],
        spec_rules=[
            rule(
                f"!({distributed}) || {keys.has('Scheduler', specs)}",
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
        keys=keys,
    )
