"""A distributed TensorFlow job: training-operator v1.9's TFJob."""

from __future__ import annotations

from ..common import ReplicaKeys
from ..kind import Kind
from ..schema import boolean, rule, string
from .kubeflow import kubeflow_kind

TF_TYPES = ["Chief", "Master", "PS", "Worker", "Evaluator"]


def tfjob() -> Kind:
    # training-operator's webhook (validateTFReplicaSpecs) does not check the keys, and its
    # defaulter (setTensorflowTypeNamesToCamelCase) renames every type from any case: a TFJob
    # with ps and worker keys runs there.
    keys = ReplicaKeys(TF_TYPES, folded=TF_TYPES)
    chief = keys.names("k", ["Chief", "Master"])
    return kubeflow_kind(
        "TFJob",
        "tfReplicaSpecs",
        TF_TYPES,
        "tensorflow",
        "A distributed TensorFlow training job (training-operator v1.9 compatible). Each "
        "replica type gets TF_CONFIG in its 'tensorflow' container.",
        [
            rule(
                f"!({keys.has('Chief')} && {keys.has('Master')})",
                "spec.tfReplicaSpecs must not have both Chief and Master: they are the same role (Master "
                "is the legacy name); keep one of them",
            ),
            rule(
                f"self.all(k, !({chief}) || self[k].replicas <= 1)",
                "spec.tfReplicaSpecs Chief/Master replicas must be 0 or 1: a TFJob has at most one chief; "
                "move the extra replicas to Worker",
                f"'spec.tfReplicaSpecs.' + self.filter(k, {chief} && self[k].replicas > 1)[0]"
                " + '.replicas must be 0 or 1: a TFJob has at most one chief; move the extra replicas to "
                "Worker'",
            ),
        ],
        why="TF_CONFIG is injected into that container",
        extra={
            "successPolicy": string(
                "When the job succeeds if it has no Chief/Master: empty (default) when worker 0 "
                "succeeds, AllWorkers when every worker succeeded.",
                enum=["", "AllWorkers"],
            ),
            "enableDynamicWorker": boolean(
                "true: each worker sees only itself and the PS in TF_CONFIG (sparse cluster spec), "
                "and a failed worker does not fail the job."
            ),
        },
        short_names=["tfj"],
        keys=keys,
    )
