"""JAXJob (kubeflow.org/v1), as training-operator v1.9 runs it.

Upstream sources (tag v1.9.0): ``pkg/controller.v1/jax/jaxjob_controller.go``
(``UpdateJobStatus``, ``IsMasterRole``, ``SetClusterSpec``), ``envvar.go`` (the env, see
``contracts/jax.py``), ``pkg/webhooks/jax/jaxjob_webhook.go`` (what the shared
``Profile.validate`` refuses) and ``pkg/apis/kubeflow.org/v1/jax_{types,defaults}.go``.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import jax
from training_jobs.model import ENV_ALL_CONTAINERS, RESTART_NEVER
from training_jobs.profiles.base import Outcome, Profile, failed_for_good

WORKER = "Worker"


class JAXProfile(Profile):
    kind = "JAXJob"
    api_version = "kubeflow.org/v1"
    framework = "jax"
    default_container = jax.DEFAULT_CONTAINER
    # setPodEnv writes the contract into every container of the pod.
    env_target = ENV_ALL_CONTAINERS
    default_restart_policy = RESTART_NEVER
    default_port_name = jax.DEFAULT_PORT_NAME
    default_port = jax.DEFAULT_PORT
    replica_types = (WORKER,)
    replica_specs_field = "jaxReplicaSpecs"
    # setJAXTypeNamesToCamelCase. Upstream's webhook, and so this CRD, refuse such keys: only a job
    # stored before the CRD was installed reaches the engine with one.
    camel_cased_types = (WORKER,)

    def is_master_role(self, job, group, index):
        # Upstream's IsMasterRole is index 0 of any type: worker 0 is the coordinator.
        return index == 0

    def env(self, job, group, index, ctx):
        worker = job.group(WORKER)
        return jax.pod_env(
            job.name,
            index,
            total_replicas=job.total_replicas,
            coordinator_port=jax.port_of(worker.template) if worker else jax.DEFAULT_PORT,
        )

    def outcome(self, job, counts, ctx):
        worker = job.group(WORKER)
        # Upstream's `expected == 0`: a job scaled to 0 workers has nothing left to run.
        if worker and counts[WORKER].succeeded >= worker.replicas:
            return Outcome(cond.SUCCEEDED, f"JAXJob {job.namespace}/{job.name} successfully completed.")
        failure = failed_for_good(job, counts, short_only=True)
        if failure:
            rtype, failed = failure
            return Outcome(
                cond.FAILED, f"JAXJob {job.name} is failed because {failed} {rtype} replica(s) failed."
            )
        if worker and counts[WORKER].active > 0:
            return Outcome(cond.RUNNING, f"JAXJob {job.namespace}/{job.name} is running.")
        return Outcome()
