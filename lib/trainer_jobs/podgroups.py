"""``podGroupPolicy``: the gang's PodGroup and the pod mark that joins it.

Upstream sources (kubeflow/trainer v2.3.0): ``pkg/runtime/framework/plugins/coscheduling`` and
``.../volcano``. Either PodGroup is named as the TrainJob and owned by it; ``minMember`` is every
pod of every replicated job and ``minResources`` their summed requests (one pod's
``PodRequests`` times its pod set's count; each total keeps the format of the first pod set that
requests it). scheduler-plugins' gets ``scheduleTimeoutSeconds`` (60 by default) and its pods
the label ``scheduling.x-k8s.io/pod-group``; Volcano's gets the queue from the JobSet's
annotation ``scheduling.volcano.sh/queue-name``, the last ``priorityClassName`` of the pod
templates and ``networkTopology``, and its pods the annotation ``scheduling.k8s.io/group-name``.
The v1 engine's gang (``training_jobs.gang``) counts differently (the first ``minMember`` pods,
limits for missing requests) and is not shared.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.info import Info
from trainer_jobs.resources import ResourceList, times
from training_jobs.quantity import format_quantity

COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_SCHEDULE_TIMEOUT = 60


def enforce(info: Info) -> None:
    """``EnforcePodGroupPolicy``: mark every pod for its scheduler."""
    if isinstance(info.pod_group_policy.get("coscheduling"), dict):
        info.pod_labels[POD_GROUP_LABEL] = info.name
    if isinstance(info.pod_group_policy.get("volcano"), dict):
        info.pod_annotations[VOLCANO_GROUP_ANNOTATION] = info.name


def _totals(info: Info) -> tuple[int, dict[str, str]]:
    members = 0
    total: ResourceList = {}
    for ps in info.pod_sets:
        members += ps.count
        for name, q in times(ps.requests, ps.count).items():
            total[name] = total[name] + q if name in total else q
    return members, {name: format_quantity(q) for name, q in sorted(total.items())}


def pod_groups(info: Info) -> list[dict[str, Any]]:
    """The PodGroups the runtime's ``podGroupPolicy`` asks for (none, or one per scheduler)."""
    groups = []
    members, resources = _totals(info)
    coscheduling = info.pod_group_policy.get("coscheduling")
    if isinstance(coscheduling, dict):
        timeout = coscheduling.get("scheduleTimeoutSeconds", DEFAULT_SCHEDULE_TIMEOUT)
        spec = {"minMember": members, "minResources": resources, "scheduleTimeoutSeconds": timeout}
        groups.append(_pod_group(info, COSCHEDULING_API, spec))
    volcano = info.pod_group_policy.get("volcano")
    if isinstance(volcano, dict):
        groups.append(_pod_group(info, VOLCANO_API, _volcano_spec(info, volcano, members, resources)))
    return groups


def _volcano_spec(
    info: Info, volcano: dict[str, Any], members: int, resources: dict[str, str]
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": members, "minResources": resources}
    queue = (info.annotations or {}).get(VOLCANO_QUEUE_ANNOTATION)
    if queue is not None:
        spec["queue"] = queue
    for rjob in info.rjobs():
        priority = upsert.pod_spec(rjob).get("priorityClassName")
        if priority is not None:
            spec["priorityClassName"] = priority
    topology = volcano.get("networkTopology")
    if isinstance(topology, dict):
        spec["networkTopology"] = {
            k: topology[k] for k in ("mode", "highestTierAllowed") if topology.get(k) is not None
        }
    return spec


def _pod_group(info: Info, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": api.owned_metadata(info.trainjob, info.name),
        "spec": spec,
    }
