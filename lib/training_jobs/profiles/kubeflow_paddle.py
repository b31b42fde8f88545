"""PaddleJob (kubeflow.org/v1), as training-operator v1.9 runs it.

Not paddle-operator's ``batch.paddlepaddle.org/v1`` PaddleJob (``profiles/paddle.py``): the two
kinds share a name, so the registry must tell them apart by API group.

Upstream sources (tag v1.9.0): ``pkg/controller.v1/paddlepaddle/paddlepaddle_controller.go``
(``UpdateJobStatus``, ``ContainsMasterSpec``, ``IsMasterRole``, ``SetClusterSpec``),
``envvar.go`` (the env, see ``contracts/kubeflow_paddle.py``),
``pkg/webhooks/paddlepaddle/paddlepaddle_webhook.go`` (what ``validate`` refuses) and
``pkg/apis/kubeflow.org/v1/paddlepaddle_{types,defautls}.go``.

Differences from upstream, on purpose:

- upstream walks the replica types in Go's random map order, so when the Master succeeds in the
  pass a Worker fails, either verdict can win. Here the Master's success always does, as for
  XGBoostJob: with a Master spec its result is the job's;
- a job with ``elasticPolicy`` but neither ``minReplicas``, ``maxReplicas`` nor a Worker is
  refused: upstream's defaulter dereferences the missing Worker spec and the job never runs.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import kubeflow_paddle as kp
from training_jobs.model import ENV_ALL_CONTAINERS, RESTART_ON_FAILURE, InvalidJob
from training_jobs.profiles.base import Outcome, Profile, failed_for_good

MASTER, WORKER = "Master", "Worker"


class KubeflowPaddleProfile(Profile):
    name = "kubeflow_paddlejob"  # type: ignore[assignment]  # paddle-operator's PaddleJob is "paddlejob"
    kind = "PaddleJob"
    api_version = "kubeflow.org/v1"
    framework = "paddle"
    default_container = kp.DEFAULT_CONTAINER
    # setPodEnv writes the contract into every container of the pod.
    env_target = ENV_ALL_CONTAINERS
    default_restart_policy = RESTART_ON_FAILURE
    default_port_name = kp.DEFAULT_PORT_NAME
    default_port = kp.DEFAULT_PORT
    replica_types = (MASTER, WORKER)
    replica_specs_field = "paddleReplicaSpecs"
    # setPaddleTypeNamesToCamelCase. Upstream's webhook, and so this CRD, refuse such keys: only a job
    # stored before the CRD was installed reaches the engine with one.
    camel_cased_types = (MASTER, WORKER)

    def validate(self, job):
        """What upstream's webhook refuses (``validateSpec``: replica types, containers, images,
        the ``paddle`` container; the shared checks), plus the elastic policy upstream cannot
        default."""
        super().validate(job)
        worker = job.group(WORKER)
        try:
            kp.defaulted_elastic(job.spec.get("elasticPolicy"), worker.replicas if worker else None)
        except ValueError:
            raise InvalidJob(
                "spec.elasticPolicy takes its minReplicas and maxReplicas from "
                "paddleReplicaSpecs.Worker.replicas, and the job has no Worker: "
                "add a Worker or set elasticPolicy.minReplicas and maxReplicas"
            ) from None

    def is_master_role(self, job, group, index):
        # Every Master pod, and none at all in collective mode (worker 0 is not labelled).
        return group.rtype == MASTER

    def env(self, job, group, index, ctx):
        master, worker = job.group(MASTER), job.group(WORKER)
        endpoint = master or worker
        return kp.pod_env(
            job.name,
            group.label,
            index,
            total_replicas=job.total_replicas,
            has_master=master is not None,
            endpoint_port=kp.port_of(endpoint.template) if endpoint else kp.DEFAULT_PORT,
        )

    def outcome(self, job, counts, ctx):
        """``UpdateJobStatus``: with a Master spec every Master replica succeeding completes the
        job and only running Masters make it Running; without one, the Workers decide both. A
        failed pod the engine is not recreating (restartPolicy ``Never``) fails the job, but
        only while some replica of its type is neither running nor done."""
        master, worker = job.group(MASTER), job.group(WORKER)
        name, qualified = job.name, f"{job.namespace}/{job.name}"
        # Upstream's `expected == 0`; a type scaled to 0 replicas has nothing left to run.
        if master:
            if counts[MASTER].succeeded >= master.replicas:
                return Outcome(cond.SUCCEEDED, f"PaddleJob {name} is successfully completed.")
        elif worker and counts[WORKER].succeeded >= worker.replicas:
            return Outcome(cond.SUCCEEDED, f"PaddleJob {qualified} successfully completed.")
        failure = failed_for_good(job, counts, short_only=True)
        if failure:
            rtype, failed = failure
            return Outcome(
                cond.FAILED, f"PaddleJob {job.name} is failed because {failed} {rtype} replica(s) failed."
            )
        if master:
            if counts[MASTER].active > 0:
                return Outcome(cond.RUNNING, f"PaddleJob {name} is running.")
        elif worker and counts[WORKER].active > 0:
            return Outcome(cond.RUNNING, f"PaddleJob {qualified} is running.")
        return Outcome()
