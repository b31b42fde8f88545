"""MXJob (kubeflow.org/v1), as training-operator v1.8 / kubeflow/mxnet-operator run it."""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import mxnet as mx
from training_jobs.model import ENV_ALL_CONTAINERS, RESTART_EXIT_CODE, InvalidJob
from training_jobs.profiles.base import Outcome, Profile

SCHEDULER, SERVER, WORKER = "Scheduler", "Server", "Worker"
TUNER_TRACKER, TUNER_SERVER, TUNER = "TunerTracker", "TunerServer", "Tuner"


class MXNetProfile(Profile):
    kind = "MXJob"
    api_version = "kubeflow.org/v1"
    framework = "mxnet"
    default_container = mx.DEFAULT_CONTAINER
    env_target = ENV_ALL_CONTAINERS
    default_port_name = mx.DEFAULT_PORT_NAME
    default_port = mx.DEFAULT_PORT
    replica_types = (SCHEDULER, SERVER, WORKER, TUNER_TRACKER, TUNER_SERVER, TUNER)
    replica_specs_field = "mxReplicaSpecs"
    # setMXNetTypeNamesToCamelCase (v1.8; mxnet-operator's setTypeNamesToCamelCase): not the
    # tuner types, which stay case-sensitive.
    camel_cased_types = (SCHEDULER, SERVER, WORKER)

    def validate(self, job):
        super().validate(job)
        sched = job.group(SCHEDULER)
        if sched and sched.replicas != 1:
            raise InvalidJob("mxReplicaSpecs.Scheduler.replicas must be 1: a job has exactly one scheduler")
        if self._distributed_train(job) and not sched:
            raise InvalidJob(
                "a distributed MXTrain job needs a Scheduler: add mxReplicaSpecs.Scheduler with 1 replica"
            )

    def default_restart_policy_for(self, rtype, spec):
        # mxnet-operator's scheduler rule (seed 002): the scheduler's exit code decides the job,
        # 0 success, 1-127 a permanent failure, 128-255 retryable (the pod is recreated). That
        # is the ExitCode policy; an explicit restartPolicy on the scheduler still wins.
        if rtype == SCHEDULER:
            return RESTART_EXIT_CODE
        return super().default_restart_policy_for(rtype, spec)

    def _distributed_train(self, job):
        if (job.spec.get("jobMode") or "MXTrain") != "MXTrain":
            return False
        worker = job.group(WORKER)
        return bool(job.group(SERVER)) or (worker is not None and worker.replicas > 1)

    def is_master_role(self, job, group, index):
        # training-operator's IsMasterRole for MXJob is the Server type.
        return group.rtype == SERVER

    def env(self, job, group, index, ctx):
        groups = {
            g.label: {
                "replicas": g.replicas,
                "port": mx.port_of(g.template),
                "tuner_key": mx.tuner_key_of(g.template),
            }
            for g in job.groups
        }
        return mx.mx_env(job.name, groups, group.label, index)

    def _chief(self, job):
        """The replica whose success is the job's: the scheduler, the tuner, or a lone worker.
        A type with 0 replicas decides nothing."""
        if (job.spec.get("jobMode") or "MXTrain") == "MXTune":
            candidates = (job.group(TUNER),)
        else:
            candidates = (job.group(SCHEDULER), job.group(WORKER))
        return next((g for g in candidates if g and g.replicas > 0), None)

    def outcome(self, job, counts, ctx):
        chief = self._chief(job)
        if chief and counts[chief.rtype].succeeded >= chief.replicas:
            return Outcome(cond.SUCCEEDED, f"MXJob {job.name} is successfully completed.")
        for g in job.groups:
            c = counts[g.rtype]
            if c.failed - c.restarting > 0:
                return Outcome(
                    cond.FAILED,
                    f"mxjob {job.name} is failed because {c.failed - c.restarting} {g.rtype} replica(s) failed.",
                )
        if chief and counts[chief.rtype].active > 0:
            return Outcome(cond.RUNNING, f"MXJob {job.name} is running.")
        return Outcome()
