"""PyTorchJob (kubeflow.org/v1), as training-operator v1.9 runs it."""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import pytorch as pt
from training_jobs.model import ENV_ALL_CONTAINERS, RESTART_ON_FAILURE, InvalidJob
from training_jobs.profiles.base import Outcome, Profile, failed_for_good

MASTER, WORKER = "Master", "Worker"


class PyTorchProfile(Profile):
    kind = "PyTorchJob"
    api_version = "kubeflow.org/v1"
    framework = "pytorch"
    default_container = pt.DEFAULT_CONTAINER
    # setPodEnv writes the contract into every container of the pod.
    env_target = ENV_ALL_CONTAINERS
    default_restart_policy = RESTART_ON_FAILURE
    default_port_name = pt.DEFAULT_PORT_NAME
    default_port = pt.DEFAULT_PORT
    replica_types = (MASTER, WORKER)
    replica_specs_field = "pytorchReplicaSpecs"
    # setPyTorchTypeNamesToCamelCase. Upstream's webhook, and so this CRD, refuse such keys: only a job
    # stored before the CRD was installed reaches the engine with one.
    camel_cased_types = (MASTER, WORKER)

    def validate(self, job):
        """What upstream's webhook refuses (``validatePyTorchJob``), for clusters without the
        admission policies."""
        super().validate(job)
        master = job.group(MASTER)
        if master and master.replicas != 1:
            raise InvalidJob("pytorchReplicaSpecs.Master.replicas must be 1: a job has one master")
        worker = job.group(WORKER)
        if worker and worker.replicas < 1:
            raise InvalidJob("pytorchReplicaSpecs.Worker.replicas must be at least 1")
        elastic = job.spec.get("elasticPolicy")
        if elastic is not None:
            if not worker:
                raise InvalidJob("pytorchReplicaSpecs.Worker must be configured if elastic policy is used")
            if elastic.get("nProcPerNode") is not None and job.spec.get("nprocPerNode") is not None:
                raise InvalidJob(
                    "spec.elasticPolicy.nProcPerNode must not be used with spec.nprocPerNode: "
                    "keep spec.nprocPerNode"
                )

    def is_master_role(self, job, group, index):
        if job.group(MASTER):
            return group.rtype == MASTER
        return group.rtype == WORKER and index == 0

    def _elastic(self, job):
        worker = job.group(WORKER)
        return pt.defaulted_elastic(job.spec.get("elasticPolicy"), worker.replicas if worker else 0)

    def env(self, job, group, index, ctx):
        master, worker = job.group(MASTER), job.group(WORKER)
        elastic = self._elastic(job)
        return pt.pytorch_env(
            job.name,
            {g.label: g.replicas for g in job.groups},
            group.label,
            index,
            master_port=pt.port_of(master.template) if master else None,
            worker_port=pt.port_of(worker.template) if worker else pt.DEFAULT_PORT,
            nproc_per_node=pt.defaulted_nproc_per_node(job.spec.get("nprocPerNode"), elastic),
            elastic=elastic,
        )

    def extra_observed(self, spec):
        if (spec.get("elasticPolicy") or {}).get("metrics"):
            return [
                {
                    "apiVersion": "autoscaling/v2",
                    "kind": "HorizontalPodAutoscaler",
                    "key": "horizontalpodautoscalers",
                }
            ]
        return []

    # The HPA reads the Workers to scale from the scale subresource's spec, the job's replicas,
    # not from what runs: left in place it would resize a suspended job (a queued one waiting
    # for Kueue, say) whose replicas are outside its range. Upstream keeps it.
    extras_removed_while_suspended = ("HorizontalPodAutoscaler",)

    def extra_objects(self, job, ctx):
        """``ReconcileHPA``: an elastic job with ``metrics`` gets its autoscaler. Created once;
        unlike upstream, later changes to the policy do not update it."""
        elastic = self._elastic(job)
        if not elastic or not elastic.get("metrics"):
            return []
        return [pt.autoscaler(job.name, job.namespace, self.selector(job), job.owner_reference, elastic)]

    def decorate_pod(self, job, group, index, pod, ctx):
        if group.rtype != WORKER or not job.group(MASTER):
            return
        config = ctx.config or {}
        container = pt.init_container(
            job.name,
            config.get("pytorch_init_container_image") or pt.INIT_CONTAINER_IMAGE,
            int(config.get("pytorch_init_container_max_tries") or pt.INIT_CONTAINER_MAX_TRIES),
        )
        spec = pod["spec"]
        spec["initContainers"] = [*(spec.get("initContainers") or []), container]

    def outcome(self, job, counts, ctx):
        """``UpdateJobStatus``: the Master decides; without one, all workers succeeding (or,
        elastic, any one of them) does. A failed replica under ``Never`` fails the job."""
        master, worker = job.group(MASTER), job.group(WORKER)
        name = job.name
        if master:
            c = counts[MASTER]
            if c.succeeded >= master.replicas:
                return Outcome(cond.SUCCEEDED, f"PyTorchJob {name} is successfully completed.")
        elif worker:
            c = counts[WORKER]
            elastic = job.spec.get("elasticPolicy") is not None
            if c.succeeded >= worker.replicas or (elastic and c.succeeded > 0):
                return Outcome(cond.SUCCEEDED, f"PyTorchJob {job.namespace}/{name} successfully completed.")
        failure = failed_for_good(job, counts)
        if failure:
            rtype, failed = failure
            return Outcome(
                cond.FAILED, f"PyTorchJob {job.name} is failed because {failed} {rtype} replica(s) failed."
            )
        if master and counts[MASTER].active > 0:
            return Outcome(cond.RUNNING, f"PyTorchJob {name} is running.")
        if not master and worker and counts[WORKER].active > 0:
            return Outcome(cond.RUNNING, f"PyTorchJob {job.namespace}/{name} is running.")
        return Outcome()
