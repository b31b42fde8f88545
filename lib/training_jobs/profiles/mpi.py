"""MPIJob (kubeflow.org/v1), as training-operator v1.9 runs it.

The launcher decides: it runs ``mpirun``, which reaches the workers through ``kubectl exec``, so
the job is running while the launcher is, and succeeds when it does. Workers idle (``sleep
365d`` unless they have a command) and, as upstream, keep running after the job ends unless
``cleanPodPolicy`` says otherwise. Besides the pods there is no Service; there is a ConfigMap
(the hostfile and scripts) and the launcher's ServiceAccount, Role and RoleBinding.

Differences from upstream, on purpose: a failed replica fails the job with reason
``MPIJobFailed`` (upstream's ``MPIJobMPIJobFailed`` repeats the kind), and replicas under a
restarting policy are recreated like every other kind's, where upstream leaves the job
Restarting for good.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import mpi
from training_jobs.model import ENV_FIRST_CONTAINER, InvalidJob
from training_jobs.pods import phase
from training_jobs.profiles.base import Outcome, Profile, failed_for_good

LAUNCHER, WORKER = mpi.LAUNCHER, mpi.WORKER
RBAC_API = "rbac.authorization.k8s.io/v1"


class MPIProfile(Profile):
    kind = "MPIJob"
    api_version = "kubeflow.org/v1"
    framework = "mpi"
    default_container = mpi.DEFAULT_CONTAINER
    # Upstream writes the launcher's variables into its first container, whatever its name.
    env_target = ENV_FIRST_CONTAINER
    replica_types = (LAUNCHER, WORKER)
    replica_specs_field = "mpiReplicaSpecs"
    # None: SetDefaults_MPIJob renames no key and ValidateV1MpiJobSpec wants them exact, so
    # "launcher" is an unknown replica type there too.
    camel_cased_types = ()
    observed_kinds = ("Pod", "ConfigMap")
    extras_kept_current = {"ConfigMap": "data", "Role": "rules"}

    @property
    def requires_default_container(self) -> bool:
        # Upstream's tests name the containers freely; only the SDK's log reader wants "mpi".
        return False

    def default_replicas_for(self, rtype):
        return 1 if rtype == LAUNCHER else 0

    def clean_pod_policy(self, job, succeeded=False):
        # The deprecated spec.cleanPodPolicy still counts when runPolicy has none.
        return job.run_policy.get("cleanPodPolicy") or job.spec.get("cleanPodPolicy") or "None"

    def validate(self, job):
        """``ValidateV1MpiJobSpec``, for clusters without the admission policies."""
        super().validate(job)
        launcher = job.group(LAUNCHER)
        if launcher is None:
            raise InvalidJob("mpiReplicaSpecs.Launcher is required: an MPIJob has one launcher")
        if launcher.replicas != 1:
            raise InvalidJob("mpiReplicaSpecs.Launcher.replicas must be 1: an MPIJob has one launcher")
        for g in job.groups:
            if any(not c.get("name") for c in g.containers):
                raise InvalidJob(f"mpiReplicaSpecs.{g.rtype} has a container without a name: name it")

    def extra_observed(self, spec):
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "key": "serviceaccounts"},
            {"apiVersion": RBAC_API, "kind": "Role", "key": "roles"},
            {"apiVersion": RBAC_API, "kind": "RoleBinding", "key": "rolebindings"},
        ]

    # --- names and labels ----------------------------------------------------------------------
    def pod_name(self, job, group, index):
        if group.rtype == LAUNCHER:
            return mpi.launcher_name(job.name)
        return mpi.worker_name(job.name, index)

    def is_master_role(self, job, group, index):
        return group.rtype == LAUNCHER

    def pod_labels(self, job, group, index):
        labels = super().pod_labels(job, group, index)
        if group.rtype == LAUNCHER:
            # Upstream's launcher has no index: there is one.
            del labels["training.kubeflow.org/replica-index"]
        return labels

    def replica_index(self, pod):
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get("training.kubeflow.org/replica-type") == "launcher":
            return "launcher", 0
        return super().replica_index(pod)

    def wants_services(self, job):
        return False

    # --- contract ------------------------------------------------------------------------------
    def _slots(self, job):
        return mpi.slots(job.spec.get("slotsPerWorker"))

    def _gpu_launcher(self, job):
        launcher = job.group(LAUNCHER)
        return bool(launcher) and mpi.is_gpu_launcher(launcher.template)

    def _service_account(self, job):
        launcher = job.group(LAUNCHER)
        spec = (launcher.template.get("spec") or {}) if launcher else {}
        return spec.get("serviceAccountName") or mpi.launcher_name(job.name)

    def env(self, job, group, index, ctx):
        if group.rtype != LAUNCHER or not group.containers:
            return []
        return mpi.launcher_env(group.containers[0].get("env") or [], self._gpu_launcher(job))

    def decorate_pod(self, job, group, index, pod, ctx):
        spec = pod["spec"]
        containers = spec.get("containers") or []
        if not containers:
            return
        first = containers[0]
        if group.rtype == LAUNCHER:
            spec["serviceAccountName"] = self._service_account(job)
            image = (ctx.config or {}).get("mpi_kubectl_delivery_image") or mpi.KUBECTL_DELIVERY_IMAGE
            spec["initContainers"] = [
                *(spec.get("initContainers") or []),
                mpi.kubectl_delivery(image, job.namespace),
            ]
            first["volumeMounts"] = [
                *(first.get("volumeMounts") or []),
                {"name": mpi.KUBECTL_VOLUME, "mountPath": mpi.KUBECTL_MOUNT},
                {"name": mpi.CONFIG_VOLUME, "mountPath": mpi.CONFIG_MOUNT},
            ]
            spec["volumes"] = [*(spec.get("volumes") or []), *mpi.launcher_volumes(job.name)]
            return
        if not first.get("command"):
            first["command"], first["args"] = ["sleep"], ["365d"]
        first["volumeMounts"] = [
            *(first.get("volumeMounts") or []),
            {"name": mpi.CONFIG_VOLUME, "mountPath": mpi.CONFIG_MOUNT},
        ]
        spec["volumes"] = [*(spec.get("volumes") or []), *mpi.worker_volumes(job.name)]

    def extra_objects(self, job, ctx):
        """The ServiceAccount, ConfigMap, Role and RoleBinding, created before the pods in the
        same pass (in this order, as upstream). The hostfile and discover_hosts.sh follow the
        workers, and the Role the worker names they may be exec'ed into."""
        worker = job.group(WORKER)
        workers = worker.replicas if worker else 0
        running = [
            name
            for name, pod in ctx.pods.items()
            if ((pod.get("metadata") or {}).get("labels") or {}).get("training.kubeflow.org/replica-type")
            == "worker"
            and phase(pod) == "Running"
        ]

        def meta(name):
            return {
                "name": name,
                "namespace": job.namespace,
                "labels": {**self.selector(job), "app": job.name},
                "ownerReferences": [job.owner_reference],
            }

        launcher = mpi.launcher_name(job.name)
        data = mpi.config_data(
            job.name,
            workers,
            running,
            self._slots(job),
            self._gpu_launcher(job),
            job.spec.get("mainContainer") or "",
        )
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(self._service_account(job))},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(mpi.config_name(job.name)),
                "data": data,
            },
            {
                "apiVersion": RBAC_API,
                "kind": "Role",
                "metadata": meta(launcher),
                "rules": mpi.launcher_role_rules(job.name, workers),
            },
            {
                "apiVersion": RBAC_API,
                "kind": "RoleBinding",
                "metadata": meta(launcher),
                **mpi.role_binding(job.name, job.namespace, self._service_account(job)),
            },
        ]

    # --- status --------------------------------------------------------------------------------
    def outcome(self, job, counts, ctx):
        """``UpdateJobStatus``: the launcher's phase is the job's; a replica that failed for
        good (under ``Never``) fails it."""
        name = job.name
        launcher = counts.get(LAUNCHER)
        if launcher and launcher.succeeded >= 1:
            return Outcome(cond.SUCCEEDED, f"MPIJob {name} is successfully completed.")
        failure = failed_for_good(job, counts)
        if failure:
            rtype, failed = failure
            return Outcome(
                cond.FAILED, f"MPIJob {name} is failed because {failed} {rtype} replica(s) failed."
            )
        if launcher and launcher.active > 0:
            return Outcome(cond.RUNNING, f"MPIJob {name} is running.")
        return Outcome()
