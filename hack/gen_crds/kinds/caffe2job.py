"""caffe2-operator's Caffe2Job (kubeflow.org/v1alpha1): identical workers and a rendezvous backend."""

from __future__ import annotations

from typing import Any

from ..admission import containers_var, policy_docs, template_validations
from ..common import (
    RUN_POLICY_RULES,
    dns1035_rule,
    field_name_length_rule,
    job_status,
    replica_spec,
    run_policy,
)
from ..kind import AGE_COLUMN, STATE_COLUMN, Kind
from ..schema import boolean, integer, obj, rule, string


def caffe2job() -> Kind:
    backend = obj(
        "How the workers find each other (Caffe2's rendezvous store). Cannot be changed after creation.",
        {
            "backendType": string(
                "none (a single worker needs no rendezvous), redis or nfs. Unset: none for one replica, "
                "redis for more (caffe2-operator's default).",
                enum=["none", "redis", "nfs"],
            ),
            "redisHost": string("Host of an existing Redis server (REDIS_HOST).", maxLength=253),
            "redisPort": integer(
                "Port of the Redis server (REDIS_PORT). A managed Redis listens on 6379.",
                minimum=1,
                maximum=65535,
            ),
            "nfsPath": string("Shared directory for the nfs backend (NFS_PATH).", maxLength=4096),
            "manageRedis": boolean(
                "true: the operator runs a Redis pod and service (<job>-redis) for this job and points "
                "REDIS_HOST at it, so redisHost must be unset.",
                default=False,
            ),
            "redisImage": string(
                "Image of the managed Redis (manageRedis: true). Unset: the operator's default.",
                maxLength=1024,
            ),
        },
        rules=[
            rule(
                "!(self.manageRedis && has(self.redisHost) && self.redisHost != '')",
                "set only one of spec.backendSpecs.redisHost and spec.backendSpecs.manageRedis: true "
                "(the operator sets the host of a managed Redis)",
            ),
            rule(
                "!has(self.redisImage) || self.manageRedis",
                "spec.backendSpecs.redisImage is only used with manageRedis: true: remove it or set "
                "manageRedis: true",
            ),
            rule(
                "!has(self.backendType) || self.backendType != 'nfs' || (has(self.nfsPath) && self.nfsPath != '')",
                "backendType nfs needs spec.backendSpecs.nfsPath: set the shared directory",
            ),
        ],
    )
    # The backend type in effect: upstream defaults it from the replica count.
    backend_type = (
        "(has(self.backendSpecs.backendType) ? self.backendSpecs.backendType : "
        "(self.replicaSpecs.replicas <= 1 ? 'none' : 'redis'))"
    )
    replicas = replica_spec(
        "Caffe2Job",
        None,
        "Unset: the template's restartPolicy if it has one, else Never (caffe2-operator's behaviour).",
    )
    replicas["description"] = (
        "The Caffe2 workers (one replica type; pods <job>-worker-<index>, SHARD_ID = index, "
        "NUM_SHARDS = replicas)."
    )
    termination = obj(
        "When the job has succeeded. Unset: when worker 0 has succeeded (chief WORKER/0, caffe2-operator's "
        "default).",
        {
            "chief": obj(
                "The worker whose success ends the job.",
                {
                    "replicaName": string("Replica type of the chief: WORKER (any case).", maxLength=16),
                    "replicaIndex": integer("Index of the chief worker.", minimum=0),
                },
                required=["replicaName", "replicaIndex"],
                rules=[
                    rule(
                        "self.replicaName.lowerAscii() == 'worker'",
                        "spec.terminationPolicy.chief.replicaName must be WORKER: a Caffe2Job has only "
                        "workers",
                    )
                ],
            ),
            "allWorkers": boolean(
                "true: the job succeeds when every worker has succeeded (ours; not upstream)."
            ),
        },
        rules=[
            rule(
                "!(has(self.chief) && has(self.allWorkers) && self.allWorkers)",
                "set only one of spec.terminationPolicy.chief and spec.terminationPolicy.allWorkers: true",
            )
        ],
    )
    spec_rules = [
        *RUN_POLICY_RULES,
        rule(
            f"self.replicaSpecs.replicas <= 1 || (has(self.backendSpecs) && {backend_type} != 'none')",
            "Invalid backend for multiple pods: with more than one replica set spec.backendSpecs.backendType "
            "to redis (with redisHost or manageRedis: true) or nfs (with nfsPath)",
        ),
        rule(
            f"!has(self.backendSpecs) || {backend_type} != 'redis' || self.backendSpecs.manageRedis || "
            "(has(self.backendSpecs.redisHost) && self.backendSpecs.redisHost != '')",
            "the redis backend needs a server: set spec.backendSpecs.redisHost or "
            "spec.backendSpecs.manageRedis: true",
        ),
        rule(
            f"!has(self.backendSpecs) || !self.backendSpecs.manageRedis || {backend_type} == 'redis'",
            "spec.backendSpecs.manageRedis needs backendType: redis",
        ),
        rule(
            "has(self.backendSpecs) == has(oldSelf.backendSpecs) && "
            "(!has(self.backendSpecs) || self.backendSpecs == oldSelf.backendSpecs)",
            "spec.backendSpecs is immutable: recreate the job to change the backend",
        ),
        rule(
            "!has(self.terminationPolicy) || !has(self.terminationPolicy.chief) || "
            "self.replicaSpecs.replicas == 0 || self.terminationPolicy.chief.replicaIndex < self.replicaSpecs.replicas",
            "spec.terminationPolicy.chief.replicaIndex must be less than spec.replicaSpecs.replicas: "
            "pick an existing worker",
        ),
    ]
    return Kind(
        group="kubeflow.org",
        version="v1alpha1",
        kind="Caffe2Job",
        plural="caffe2jobs",
        short_names=["c2j"],
        description="A distributed Caffe2 job (caffe2-operator compatible): identical workers that "
        "rendezvous through Redis or NFS. Every container gets SHARD_ID, NUM_SHARDS, RUN_ID, "
        "REDIS_HOST, REDIS_PORT, NFS_PATH and CAFFE2_CONFIG.",
        spec=obj(
            "Desired state of the Caffe2Job.",
            {
                "backendSpecs": backend,
                "replicaSpecs": replicas,
                "terminationPolicy": termination,
                "runPolicy": run_policy(),
            },
            required=["replicaSpecs"],
            rules=spec_rules,
        ),
        status=job_status("Caffe2Job"),
        root_rules=[
            dns1035_rule(),
            field_name_length_rule("worker", "self.spec.replicaSpecs"),
        ],
        columns=[STATE_COLUMN, AGE_COLUMN],
        policy=caffe2_policy,
    )


def caffe2_policy(k: Kind) -> list[dict[str, Any]]:
    # No rule on <namespace>-<job>-worker-<index> (caffe2-operator's CAFFE2_CONFIG hosts): a name
    # that would not fit falls back to a shortened one (training_jobs.contracts.caffe2.dns_label).
    variables = [
        {"name": "present", "expression": "['replicaSpecs']"},
        {"name": "containers", "expression": containers_var({"replicaSpecs": "object.spec.?replicaSpecs"})},
    ]
    validations = [*template_validations("'spec.'", None, "")]
    return policy_docs(k, variables, validations)
