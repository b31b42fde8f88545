"""Caffe2Job (kubeflow.org/v1alpha1), as kubeflow/caffe2-operator runs it.

Differences from upstream, on purpose: pods are named ``<job>-worker-<i>`` (upstream used random
names), and the hosts CAFFE2_CONFIG names (``<ns>-<job>-worker-<i>``) get headless Services so
they resolve (upstream created none). Names and label values that would not be valid (longer than
63 characters, or a Service name starting with a digit) take ``c2.dns_label``'s fallback.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import caffe2 as c2
from training_jobs.model import ENV_ALL_CONTAINERS, InvalidJob
from training_jobs.pods import phase, terminating
from training_jobs.profiles.base import Outcome, Profile

WORKER = "Worker"
REDIS_PORT = 6379
CAFFE2_PORT = 2222


class Caffe2Profile(Profile):
    kind = "Caffe2Job"
    api_version = "kubeflow.org/v1alpha1"
    framework = "caffe2"
    default_container = "caffe2"
    env_target = ENV_ALL_CONTAINERS
    replica_types = (WORKER,)

    def replica_specs(self, spec):
        rs = spec.get("replicaSpecs")
        return {WORKER: rs} if rs else {}

    def default_restart_policy_for(self, rtype, spec):
        # Upstream kept the template's own policy and defaulted it to Never.
        template = (spec.get("replicaSpecs") or {}).get("template") or {}
        return (template.get("spec") or {}).get("restartPolicy") or "Never"

    def validate(self, job):
        super().validate(job)
        backend = job.spec.get("backendSpecs") or {}
        btype = backend.get("backendType") or ("none" if job.total_replicas <= 1 else "redis")
        if btype == "none" and job.total_replicas > 1:
            raise InvalidJob(
                "Invalid backend for multiple pods: set backendSpecs.backendType to redis or nfs"
            )
        if btype == "redis" and not backend.get("redisHost") and not backend.get("manageRedis"):
            raise InvalidJob("a redis backend needs backendSpecs.redisHost, or manageRedis: true to run one")
        if btype == "nfs" and not backend.get("nfsPath"):
            raise InvalidJob("an nfs backend needs backendSpecs.nfsPath")

    wake_label = "caffe2_job_key"

    def selector_for(self, name, namespace):
        return {"group_name": "kubeflow.org", "caffe2_job_key": c2.label_value(c2.job_key(namespace, name))}

    def pod_labels(self, job, group, index):
        return {
            **self.selector(job),
            # A RuntimeID the user set need not be a valid label value; RUN_ID keeps it as is.
            "runtime_id": c2.label_value(self._run_id(job)),
            "caffe2_replica_type": group.label,
            "caffe2_replica_index": str(index),
        }

    def group_selector(self, job, group):
        labels = {**self.selector(job), "caffe2_replica_type": group.label}
        return ",".join(f"{k}={v}" for k, v in labels.items())

    def replica_index(self, obj):
        labels = (obj.get("metadata") or {}).get("labels") or {}
        index = labels.get("caffe2_replica_index")
        if labels.get("caffe2_replica_type") is None or index is None or not str(index).isdigit():
            return None
        return labels["caffe2_replica_type"], int(index)

    def service_name(self, job, group, index):
        return c2.host_name(job.namespace, job.name, index)

    def service_ports(self, job, group):
        return [{"name": "caffe2-port", "port": CAFFE2_PORT, "targetPort": CAFFE2_PORT}]

    def _run_id(self, job):
        return c2.run_id_for({"spec": job.spec, "metadata": job.metadata})

    def _redis_name(self, job):
        return c2.dns_label(job.name, "-redis")

    def _backend(self, job):
        backend = dict(job.spec.get("backendSpecs") or {})
        if backend.get("manageRedis") and not backend.get("redisHost"):
            backend["redisHost"] = self._redis_name(job)
            backend["redisPort"] = REDIS_PORT
        return backend

    def env(self, job, group, index, ctx):
        return c2.caffe2_env(
            job.namespace, job.name, group.replicas, index, self._run_id(job), self._backend(job)
        )

    def extra_objects(self, job, ctx):
        backend = job.spec.get("backendSpecs") or {}
        if not backend.get("manageRedis") or backend.get("redisHost"):
            return []
        name = self._redis_name(job)
        labels = {**self.selector(job), "caffe2_role": "redis"}
        image = (
            backend.get("redisImage")
            or (ctx.config or {}).get("redis_image")
            or "docker.io/library/redis:7.4"
        )

        def meta():
            return {
                "name": name,
                "namespace": job.namespace,
                "labels": dict(labels),
                "ownerReferences": [job.owner_reference],
            }

        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta(),
            "spec": {
                "containers": [
                    {
                        "name": "redis",
                        "image": image,
                        "ports": [{"name": "redis", "containerPort": REDIS_PORT}],
                    }
                ],
                "restartPolicy": "Always",
            },
        }
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(),
            "spec": {
                "selector": labels,
                "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": REDIS_PORT}],
            },
        }
        return [pod, service]

    def extra_objects_first(self, job, ctx):
        return True

    def outcome(self, job, counts, ctx):
        g = job.group(WORKER)
        c = counts[WORKER]
        policy = job.spec.get("terminationPolicy") or {}
        if policy.get("allWorkers"):
            done = g.replicas > 0 and c.succeeded >= g.replicas
        else:
            chief = policy.get("chief") or {}
            index = int(chief.get("replicaIndex") or 0)
            pod = ctx.pods.get(self.pod_name(job, g, index))
            done = bool(pod) and not terminating(pod) and phase(pod) == "Succeeded"
        if done:
            return Outcome(cond.SUCCEEDED, f"Caffe2Job {job.name} is successfully completed.")
        if c.failed - c.restarting > 0:
            return Outcome(cond.FAILED, f"Caffe2Job {job.name} is failed.")
        if c.active > 0:
            return Outcome(cond.RUNNING, f"Caffe2Job {job.name} is running.")
        return Outcome()
