"""An MXNet training or tuning job: training-operator v1.8's MXJob."""

from __future__ import annotations

from ..admission import map_policy
from ..common import (
    RUN_POLICY_RULES,
    dns1035_rule,
    job_status,
    map_name_length_rule,
    replica_map,
    replica_spec,
    run_policy,
)
from ..kind import AGE_COLUMN, STATE_COLUMN, Kind
from ..schema import obj, rule, string

MX_TYPES = ["Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"]


def mxjob() -> Kind:
    spec = replica_spec("MXJob", "Never", "Defaults to Never.")
    specs = replica_map(
        "mxReplicaSpecs",
        "MXJob",
        MX_TYPES,
        spec,
        [
            rule(
                "!('Scheduler' in self) || self['Scheduler'].replicas == 1",
                "spec.mxReplicaSpecs.Scheduler.replicas must be 1: MXNet has exactly one scheduler "
                "(<job>-scheduler-0)",
            ),
        ],
    )
    distributed = (
        "self.jobMode == 'MXTrain' && "
        "('Server' in self.mxReplicaSpecs || "
        "('Worker' in self.mxReplicaSpecs && self.mxReplicaSpecs['Worker'].replicas > 1))"
    )
    spec_rules = [
        *RUN_POLICY_RULES,
        rule(
            f"!({distributed}) || 'Scheduler' in self.mxReplicaSpecs",
            "a distributed MXJob (jobMode MXTrain with a Server or more than one Worker) needs exactly one "
            "scheduler: add spec.mxReplicaSpecs.Scheduler with replicas: 1",
        ),
    ]
    return Kind(
        group="kubeflow.org",
        version="v1",
        kind="MXJob",
        plural="mxjobs",
        short_names=["mxj"],
        description="A distributed MXNet training or tuning job (training-operator v1.8 / mxnet-operator "
        "compatible). Every container gets MX_CONFIG and the DMLC_* variables.",
        spec=obj(
            "Desired state of the MXJob.",
            {
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
                "mxReplicaSpecs": specs,
                "runPolicy": run_policy(),
            },
            required=["mxReplicaSpecs"],
            rules=spec_rules,
        ),
        status=job_status("MXJob"),
        root_rules=[
            dns1035_rule(),
            map_name_length_rule("self.spec.mxReplicaSpecs"),
        ],
        columns=[STATE_COLUMN, AGE_COLUMN],
        policy=map_policy("mxReplicaSpecs", MX_TYPES, "mxnet", "the operator reads the mxjob-port from it"),
    )
