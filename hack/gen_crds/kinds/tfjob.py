"""A distributed TensorFlow job: training-operator v1.9's TFJob."""

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
from ..schema import boolean, obj, rule, string

TF_TYPES = ["Chief", "Master", "PS", "Worker", "Evaluator"]


def tfjob() -> Kind:
    spec = replica_spec(
        "TFJob",
        "Never",
        "Defaults to Never.",
    )
    specs = replica_map(
        "tfReplicaSpecs",
        "TFJob",
        TF_TYPES,
        spec,
        [
            rule(
                "!('Chief' in self && 'Master' in self)",
                "spec.tfReplicaSpecs must not have both Chief and Master: they are the same role (Master "
                "is the legacy name); keep one of them",
            ),
            rule(
                "['Chief', 'Master'].all(t, !(t in self) || self[t].replicas <= 1)",
                "spec.tfReplicaSpecs Chief/Master replicas must be 0 or 1: a TFJob has at most one chief; "
                "move the extra replicas to Worker",
                "'spec.tfReplicaSpecs.' + ['Chief', 'Master'].filter(t, t in self && self[t].replicas > 1)[0]"
                " + '.replicas must be 0 or 1: a TFJob has at most one chief; move the extra replicas to "
                "Worker'",
            ),
        ],
    )
    return Kind(
        group="kubeflow.org",
        version="v1",
        kind="TFJob",
        plural="tfjobs",
        short_names=["tfj"],
        description="A distributed TensorFlow training job (training-operator v1.9 compatible). Each "
        "replica type gets TF_CONFIG in its 'tensorflow' container.",
        spec=obj(
            "Desired state of the TFJob.",
            {
                "tfReplicaSpecs": specs,
                "runPolicy": run_policy(),
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
            required=["tfReplicaSpecs"],
            rules=RUN_POLICY_RULES,
        ),
        status=job_status("TFJob"),
        root_rules=[
            dns1035_rule(),
            map_name_length_rule("self.spec.tfReplicaSpecs"),
        ],
        columns=[STATE_COLUMN, AGE_COLUMN],
        policy=map_policy(
            "tfReplicaSpecs", TF_TYPES, "tensorflow", "TF_CONFIG is injected into that container"
        ),
    )
