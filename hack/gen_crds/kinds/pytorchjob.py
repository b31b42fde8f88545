"""A PyTorch job with torchrun's elastic policy: training-operator v1.9's PyTorchJob."""

from __future__ import annotations

from ..kind import Kind
from ..schema import Schema, boolean, integer, obj, rule, string
from .kubeflow import kubeflow_kind

PYTORCH_TYPES = ["Master", "Worker"]


def elastic_policy() -> Schema:
    return obj(
        "Elastic training with torchrun's rendezvous: the PET_* variables. Needs a Worker replica type.",
        {
            "minReplicas": integer(
                "Fewest workers the job runs with (PET_NNODES min:max). Unset: maxReplicas, or Worker replicas.",
                minimum=1,
            ),
            "maxReplicas": integer(
                "Most workers the job runs with. Unset: minReplicas, or Worker replicas.", minimum=1
            ),
            "rdzvBackend": string(
                "Rendezvous backend (PET_RDZV_BACKEND). Defaults to c10d.", enum=["c10d", "etcd", "etcd-v2"]
            ),
            "rdzvPort": integer(
                "Rendezvous port. Defaults to the Worker's pytorchjob-port.", minimum=1, maximum=65535
            ),
            "rdzvHost": string("Rendezvous host. Defaults to <job>-worker-0."),
            "rdzvId": string("Rendezvous id (PET_RDZV_ID)."),
            "rdzvConf": {
                "description": "Extra rendezvous settings (PET_RDZV_CONF, key=value,...).",
                "type": "array",
                "items": obj("One rendezvous setting.", {"key": string("Name."), "value": string("Value.")}),
            },
            "standalone": boolean("Start a local standalone rendezvous (PET_STANDALONE)."),
            "nProcPerNode": integer(
                "Deprecated: use spec.nprocPerNode (the two are exclusive). Processes per node.", minimum=1
            ),
            "maxRestarts": integer(
                "Restarts of the worker group before torchrun fails (PET_MAX_RESTARTS).", minimum=0
            ),
            "metrics": {
                "description": "HorizontalPodAutoscaler metrics (autoscaling/v2 MetricSpec) to scale the "
                "workers between minReplicas and maxReplicas.",
                "type": "array",
                "items": {
                    "description": "One autoscaling/v2 MetricSpec.",
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
        rules=[
            rule(
                "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
                "spec.elasticPolicy.minReplicas must not be greater than maxReplicas: lower minReplicas or raise "
                "maxReplicas",
            )
        ],
    )


def pytorchjob() -> Kind:
    spec_rules = [
        rule(
            "!has(self.elasticPolicy) || 'Worker' in self.pytorchReplicaSpecs",
            "spec.pytorchReplicaSpecs.Worker must be configured if elastic policy is used: add a Worker replica type",
        ),
        rule(
            "!has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode) || !has(self.nprocPerNode)",
            "spec.elasticPolicy.nProcPerNode must not be used with spec.nprocPerNode: keep spec.nprocPerNode",
        ),
    ]
    return kubeflow_kind(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        PYTORCH_TYPES,
        "pytorch",
        "A distributed PyTorch training job (training-operator v1.9 compatible). Every "
        "container gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and torchrun's PET_* variables.",
        [
            rule(
                "!('Master' in self) || self['Master'].replicas == 1",
                "spec.pytorchReplicaSpecs.Master.replicas must be 1: a PyTorchJob has one master "
                "(<job>-master-0, MASTER_ADDR)",
            ),
            rule(
                "!('Worker' in self) || self['Worker'].replicas >= 1",
                "spec.pytorchReplicaSpecs.Worker.replicas must be at least 1: remove the Worker replica type "
                "for a master-only job",
            ),
        ],
        restart_default="OnFailure",
        spec_rules=spec_rules,
        extra={
            "elasticPolicy": elastic_policy(),
            "nprocPerNode": string(
                "Processes per node (PET_NPROC_PER_NODE): auto, cpu, gpu or a number. Defaults to auto."
            ),
        },
        short_names=["ptj"],
        scale={
            "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
    )
