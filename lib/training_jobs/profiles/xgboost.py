"""XGBoostJob (kubeflow.org/v1), as training-operator v1.9 runs it.

Upstream sources (tag v1.9.0): ``pkg/controller.v1/xgboost/xgboostjob_controller.go``
(``UpdateJobStatus``, ``IsMasterRole``, ``SetClusterSpec``), ``xgboost.go`` (the env, see
``contracts/xgboost.py``), ``pkg/webhooks/xgboost/xgboostjob_webhook.go`` (what ``validate``
refuses) and ``pkg/apis/kubeflow.org/v1/xgboost_{types,defaults}.go``.

One difference, on purpose: upstream walks the replica types in Go's random map order, so when
the master succeeds in the same pass as a worker fails, either verdict can win. Here the
master's success always does, as for TFJob and MXJob: the master's result is the job's.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import xgboost as xgb
from training_jobs.model import ENV_ALL_CONTAINERS, RESTART_NEVER, InvalidJob
from training_jobs.profiles.base import Outcome, Profile, failed_for_good

MASTER, WORKER = "Master", "Worker"


class XGBoostProfile(Profile):
    kind = "XGBoostJob"
    api_version = "kubeflow.org/v1"
    framework = "xgboost"
    default_container = xgb.DEFAULT_CONTAINER
    # SetPodEnv writes the contract into every container of the pod.
    env_target = ENV_ALL_CONTAINERS
    default_restart_policy = RESTART_NEVER
    default_port_name = xgb.DEFAULT_PORT_NAME
    default_port = xgb.DEFAULT_PORT
    replica_types = (MASTER, WORKER)
    replica_specs_field = "xgbReplicaSpecs"
    # setXGBoostJobTypeNamesToCamelCase. Upstream's webhook, and so this CRD, refuse such keys: only a job
    # stored before the CRD was installed reaches the engine with one.
    camel_cased_types = (MASTER, WORKER)

    def validate(self, job):
        """What upstream's webhook refuses (``validateXGBReplicaSpecs``), for clusters without
        the admission policies."""
        super().validate(job)
        master = job.group(MASTER)
        if master is None:
            raise InvalidJob(
                "xgbReplicaSpecs.Master must be present: add a Master with replicas: 1 "
                "(its address is every pod's MASTER_ADDR)"
            )
        if master.replicas != 1:
            raise InvalidJob("xgbReplicaSpecs.Master.replicas must be 1: a job has exactly one master")

    def is_master_role(self, job, group, index):
        return group.rtype == MASTER

    def env(self, job, group, index, ctx):
        master, worker = job.group(MASTER), job.group(WORKER)
        return xgb.pod_env(
            job.name,
            group.label,
            index,
            master_replicas=master.replicas if master else 0,
            worker_replicas=worker.replicas if worker else 0,
            master_port=xgb.port_of(master.template) if master else xgb.DEFAULT_PORT,
            worker_port=xgb.port_of(worker.template) if worker else None,
        )

    def outcome(self, job, counts, ctx):
        master = job.group(MASTER)
        if master and counts[MASTER].succeeded >= master.replicas:
            return Outcome(cond.SUCCEEDED, f"XGBoostJob {job.name} is successfully completed.")
        failure = failed_for_good(job, counts)
        if failure:
            rtype, failed = failure
            return Outcome(
                cond.FAILED, f"XGBoostJob {job.name} is failed because {failed} {rtype} replica(s) failed."
            )
        # Only the master's pods make the job Running: running workers alone do not.
        if master and counts[MASTER].active > 0:
            return Outcome(cond.RUNNING, f"XGBoostJob {job.name} is running.")
        return Outcome()
