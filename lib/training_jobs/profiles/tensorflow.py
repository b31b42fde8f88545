"""TFJob (kubeflow.org/v1), as training-operator v1.9 runs it."""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import tensorflow as tf
from training_jobs.model import ENV_DEFAULT_CONTAINER, InvalidJob
from training_jobs.pods import exit_code, phase, terminating
from training_jobs.profiles.base import Context, Outcome, Profile, failed_groups_message

CHIEF, MASTER, WORKER, PS, EVALUATOR = "Chief", "Master", "Worker", "PS", "Evaluator"


class TensorFlowProfile(Profile):
    kind = "TFJob"
    api_version = "kubeflow.org/v1"
    framework = "tensorflow"
    default_container = "tensorflow"
    env_target = ENV_DEFAULT_CONTAINER
    default_port_name = "tfjob-port"
    default_port = 2222
    # Upstream's evaluation order of UpdateJobStatus.
    replica_types = (CHIEF, EVALUATOR, MASTER, PS, WORKER)
    replica_specs_field = "tfReplicaSpecs"
    # setTensorflowTypeNamesToCamelCase; the webhook does not check the keys, so ps and worker run.
    camel_cased_types = (PS, WORKER, CHIEF, MASTER, EVALUATOR)

    def validate(self, job):
        super().validate(job)
        if job.group(CHIEF) and job.group(MASTER):
            raise InvalidJob(
                "tfReplicaSpecs must not have more than 1 Chief or Master role: keep one of them"
            )

    def chief(self, job):
        """The Chief or Master that decides the job; one with 0 replicas decides nothing, and
        the workers' rule applies (upstream would call such a job Succeeded at once)."""
        group = job.group(CHIEF) or job.group(MASTER)
        return group if group and group.replicas > 0 else None

    def is_master_role(self, job, group, index):
        if self.chief(job):
            return group.rtype in (CHIEF, MASTER)
        return group.rtype == WORKER and index == 0

    def env(self, job, group, index, ctx: Context):
        cluster = {g.label: (g.replicas, tf.port_of(g.template)) for g in job.groups}
        return tf.env_for(
            job.name,
            job.namespace,
            cluster,
            group.label,
            index,
            cluster_domain=(ctx.config or {}).get("cluster_domain", ""),
            dynamic_worker=bool(job.spec.get("enableDynamicWorker")),
        )

    def outcome(self, job, counts, ctx):
        chief = self.chief(job)
        dynamic = bool(job.spec.get("enableDynamicWorker"))
        if chief:
            c = counts[chief.rtype]
            if c.succeeded >= chief.replicas:
                return Outcome(cond.SUCCEEDED, f"TFJob {job.namespace}/{job.name} successfully completed.")
        else:
            worker = job.group(WORKER)
            if worker and worker.replicas > 0:
                c = counts[WORKER]
                all_done = c.succeeded >= worker.replicas
                if all_done or (
                    job.spec.get("successPolicy") != "AllWorkers" and self._worker0_completed(job, ctx)
                ):
                    return Outcome(
                        cond.SUCCEEDED, f"TFJob {job.namespace}/{job.name} successfully completed."
                    )
        for g in job.groups:
            c = counts[g.rtype]
            if c.failed - c.restarting > 0 and not (dynamic and g.rtype == WORKER):
                return Outcome(cond.FAILED, failed_groups_message(job, g.rtype, c.failed - c.restarting))
        running_group = chief or job.group(WORKER)
        if running_group and counts[running_group.rtype].active > 0:
            return Outcome(cond.RUNNING, f"TFJob {job.namespace}/{job.name} is running.")
        return Outcome()

    def _worker0_completed(self, job, ctx):
        pod = ctx.pods.get(f"{job.name}-worker-0")
        return (
            bool(pod)
            and not terminating(pod)
            and phase(pod) == "Succeeded"
            and exit_code(pod, self.default_container) == 0
        )
