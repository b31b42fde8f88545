"""training-operator v1.9's PaddleJob (kubeflow.org), not paddle-operator's."""

from __future__ import annotations

from ..kind import Kind
from ..schema import integer, obj, rule
from .kubeflow import kubeflow_kind

# Must match watches.yaml and roles/kubeflow_paddlejob (tests/unit/test_wiring.py checks).
KUBEFLOW_PADDLEJOB_RUNTIME_VERSION = "v1-runtime"


def kubeflow_paddlejob() -> Kind:
    """training-operator's PaddleJob, not paddle-operator's (``paddlejob`` below)."""
    elastic = obj(
        "Elastic training bounds. training-operator v1.9 only defaults them (min from max and back, "
        "else the Worker replicas); no variable or autoscaler reads them.",
        {
            "minReplicas": integer("Fewest workers.", minimum=1),
            "maxReplicas": integer("Most workers.", minimum=1),
            "maxRestarts": integer("Restarts of the worker group.", minimum=0),
            "metrics": {
                "description": "HorizontalPodAutoscaler metrics (autoscaling/v2 MetricSpec); accepted, unused.",
                "type": "array",
                "items": {
                    "description": "One autoscaling/v2 MetricSpec.",
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
    )
    return kubeflow_kind(
        "PaddleJob",
        "paddleReplicaSpecs",
        ["Master", "Worker"],
        "paddle",
        "A distributed PaddlePaddle job (training-operator v1.9 compatible, not paddle-operator's "
        "batch.paddlepaddle.org PaddleJob). Every container gets PADDLE_MASTER, PADDLE_NNODES and "
        "PADDLE_JOB_ID.",
        [],
        restart_default="OnFailure",
        why="the operator reads its port named master from it",
        extra={"elasticPolicy": elastic},
        spec_rules=[
            rule(
                "!has(self.elasticPolicy) || 'Worker' in self.paddleReplicaSpecs || "
                "has(self.elasticPolicy.minReplicas) || has(self.elasticPolicy.maxReplicas)",
                "spec.elasticPolicy takes its bounds from the Worker replicas and the job has no Worker: "
                "add a Worker or set elasticPolicy.minReplicas and maxReplicas",
            )
        ],
        scale={
            "specReplicasPath": ".spec.paddleReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
        name="kubeflow_paddlejob",
        runtime_version=KUBEFLOW_PADDLEJOB_RUNTIME_VERSION,
    )
