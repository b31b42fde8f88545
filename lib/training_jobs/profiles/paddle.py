"""PaddleJob (batch.paddlepaddle.org/v1), as PaddleFlow's paddle-operator v0.3.5 runs it.

Differences from upstream, on purpose:

- the job ConfigMap every pod imports is never created after pods that need it. In Service mode
  the endpoints are pod names, known in advance, so the ConfigMap is created before any pod; in
  PodIP and Host mode it needs the pods' addresses, and the pods' containers wait for it through
  their non-optional ``envFrom`` (upstream's race, PR #80);
- a pod's Service is created with the pod, not on the next reconcile after it, and carries the
  job's labels (upstream's has none; it finds its Services by owner, we by label). Its selector
  is the pod's labels, of which upstream's ``paddle-res-name`` alone already picks that pod.
"""

from __future__ import annotations

from training_jobs import conditions as cond
from training_jobs.contracts import paddle as pd
from training_jobs.model import ENV_FIRST_CONTAINER
from training_jobs.pods import phase
from training_jobs.profiles.base import Outcome, Profile, failed_groups_message

PS, WORKER, HETER = "ps", "worker", "heter"


class PaddleProfile(Profile):
    kind = "PaddleJob"
    api_version = "batch.paddlepaddle.org/v1"
    framework = "paddle"
    default_container = "paddle"
    env_target = ENV_FIRST_CONTAINER
    replica_types = (PS, WORKER, HETER)
    # The job ConfigMap every non-elastic pod imports.
    observed_kinds = ("Pod", "Service", "ConfigMap")

    def replica_specs(self, spec):
        return {t: spec[t] for t in self.replica_types if spec.get(t)}

    def _intranet(self, job_or_spec):
        spec = job_or_spec if isinstance(job_or_spec, dict) else job_or_spec.spec
        return spec.get("intranet") or pd.INTRANET_POD_IP

    def _elastic(self, spec):
        return spec.get("elastic") not in (None, 0, False, {})

    def default_restart_policy_for(self, rtype, spec):
        template_policy = (((spec.get(rtype) or {}).get("template") or {}).get("spec") or {}).get(
            "restartPolicy", ""
        )
        return pd.default_restart_policy(
            rtype, self._intranet(spec), self._elastic(spec), template_policy or ""
        )

    def clean_pod_policy(self, job, succeeded=False):
        policy = job.spec.get("cleanPodPolicy")
        if not policy and job.run_policy.get("cleanPodPolicy"):
            return super().clean_pod_policy(job, succeeded)
        # Upstream's clean-up deletes every pod and Service whatever its phase: the engine's All.
        return "All" if pd.cleans_up(policy, completed=succeeded) else "None"

    def pod_labels(self, job, group, index):
        name = self.pod_name(job, group, index)
        return {
            **super().pod_labels(job, group, index),
            "paddle-res-name": name,
            "paddle-res-type": group.label,
        }

    def is_master_role(self, job, group, index):
        return False

    def _pod_env(self, job, group, index):
        worker = job.group(WORKER)
        return pd.pod_env(
            job.name,
            job.namespace,
            group.label,
            index,
            self._intranet(job),
            self._elastic(job.spec),
            worker.replicas if worker else None,
        )

    def env(self, job, group, index, ctx):
        return self._pod_env(job, group, index)["env"]

    def env_from(self, job, group, index, ctx):
        return self._pod_env(job, group, index)["envFrom"]

    def decorate_pod(self, job, group, index, pod, ctx):
        name = pod["metadata"]["name"]
        pod["metadata"].setdefault("annotations", {})["paddle-resource"] = group.label
        spec = pod["spec"]
        spec["hostname"] = name
        spec["subdomain"] = name
        intranet = self._intranet(job)
        if intranet == pd.INTRANET_HOST:
            spec["hostNetwork"] = True
        if intranet == pd.INTRANET_SERVICE and spec.get("containers"):
            first = spec["containers"][0]
            ports = list(first.get("ports") or [])
            if not any(p.get("containerPort") == pd.PADDLE_PORT for p in ports):
                ports.append({"containerPort": pd.PADDLE_PORT})
            first["ports"] = ports

    def wants_services(self, job):
        # In every intranet mode, elastic or not: v0.3.5 creates a Service for each pod it lists
        # and its Service-mode check around that loop is commented out. The coord-paddle init
        # container's nslookup of every pod name needs them even in PodIP and Host mode.
        return True

    def service_ports(self, job, group):
        return pd.service_ports()

    def extra_objects(self, job, ctx):
        if self._elastic(job.spec):
            return []
        intranet = self._intranet(job)
        endpoints = {}
        for g in job.groups:
            addrs = []
            for i in range(g.replicas):
                name = self.pod_name(job, g, i)
                if intranet == pd.INTRANET_SERVICE:
                    addrs.append(name)
                    continue
                ip = ((ctx.pods.get(name) or {}).get("status") or {}).get("podIP")
                if not ip:
                    return []  # not every pod has an address yet
                addrs.append(ip)
            endpoints[g.label] = addrs
        data = pd.configmap_data(endpoints, intranet, job.spec.get("withGloo"), pd.job_port(job.uid))
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": job.name,
                    "namespace": job.namespace,
                    "labels": self.selector(job),
                    "ownerReferences": [job.owner_reference],
                },
                "data": data,
            }
        ]

    def extra_objects_first(self, job, ctx):
        return self._intranet(job) == pd.INTRANET_SERVICE

    def outcome(self, job, counts, ctx):
        for g in job.groups:
            c = counts[g.rtype]
            if c.failed - c.restarting > 0:
                return Outcome(cond.FAILED, failed_groups_message(job, g.rtype, c.failed - c.restarting))
        if job.groups and all(counts[g.rtype].succeeded >= g.replicas for g in job.groups):
            return Outcome(cond.SUCCEEDED, f"PaddleJob {job.namespace}/{job.name} successfully completed.")
        if any(counts[g.rtype].active for g in job.groups):
            return Outcome(cond.RUNNING, f"PaddleJob {job.namespace}/{job.name} is running.")
        return Outcome()

    def status_extras(self, job, counts, ctx, conditions):
        roles = {}
        for g in job.groups:
            status = {
                "pending": 0,
                "starting": 0,
                "running": 0,
                "failed": 0,
                "succeeded": 0,
                "unknown": 0,
                "refs": [],
            }
            for i in range(g.replicas):
                pod = ctx.pods.get(self.pod_name(job, g, i))
                if pod is None:
                    continue
                ph = phase(pod)
                ready = all(s.get("ready") for s in (pod.get("status") or {}).get("containerStatuses") or [])
                if ph == "Pending":
                    status["pending"] += 1
                elif ph == "Running":
                    status["running" if ready else "starting"] += 1
                elif ph in ("Succeeded", "Failed"):
                    status[ph.lower()] += 1
                else:
                    status["unknown"] += 1
                meta = pod["metadata"]
                status["refs"].append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "namespace": meta.get("namespace"),
                        "uid": meta.get("uid", ""),
                    }
                )
            roles[g.label] = status
        ps, worker = job.group(PS), job.group(WORKER)
        return {
            **roles,
            "phase": self._phase(job, roles, conditions),
            "mode": pd.mode(ps.replicas if ps else None, worker.replicas if worker else None),
        }

    def _phase(self, job, roles, conditions):
        if job.metadata.get("deletionTimestamp"):
            return "Terminating"
        if cond.is_true(conditions, cond.SUCCEEDED):
            return "Completed"
        if cond.is_true(conditions, cond.FAILED):
            return "Failed"
        if cond.is_true(conditions, cond.SUSPENDED):
            return "Suspended"
        if cond.is_true(conditions, cond.RESTARTING):
            return "Restarting"
        totals = {k: sum(r[k] for r in roles.values()) for k in ("failed", "starting", "pending")}
        if totals["starting"]:
            return "Starting"
        if totals["pending"]:
            return "Pending"
        if job.groups and all(roles[g.label]["running"] == g.replicas for g in job.groups):
            return "Running"
        return "Pending"
