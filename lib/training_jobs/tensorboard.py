"""TensorBoard per job, opt-in (the original TfJob's ``tensorboard`` option, seed 004).

A job annotated with ``training.ato.dev/tensorboard-log-dir: <path>`` gets a Deployment and a
Service named ``<job>-tensorboard`` (shortened by :func:`name` when too long), owned by the job,
serving the log directory on port 6006. The log directory must be on a volume the job's pods
mount; the TensorBoard pod mounts the same volume (read-only) at the same path, taken from the
chief/master group, else the first group.
``training.ato.dev/tensorboard-image`` overrides the image (operator default:
``TENSORBOARD_IMAGE``). TensorBoard outlives the job's pods and goes with the job.
"""

from __future__ import annotations

import copy
from typing import Any

# The operator's one name-fitting rule; it lives with Caffe2, whose host names needed it first.
from training_jobs.contracts.caffe2 import dns_label, label_value
from training_jobs.model import InvalidJob, Job

LOG_DIR_ANNOTATION = "training.ato.dev/tensorboard-log-dir"
IMAGE_ANNOTATION = "training.ato.dev/tensorboard-image"
# TensorBoard's pods carry only these labels, not the job's: they are no replica of the job.
POD_LABEL = "training.ato.dev/tensorboard-of"
PORT = 6006
DEFAULT_IMAGE = "docker.io/tensorflow/tensorflow:2.16.1"


def requested(job: Job) -> str:
    """The log directory the job asks TensorBoard for, or ``""``."""
    return str((job.metadata.get("annotations") or {}).get(LOG_DIR_ANNOTATION) or "")


def name(job_name: str) -> str:
    """``<job>-tensorboard``, or :func:`dns_label`'s fallback when that is longer than 63
    characters (a job name may have 63): the Service name must be a DNS-1035 label."""
    return dns_label(job_name, "-tensorboard")


def _log_volume(job: Job, log_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (volume, mount) that holds ``log_dir`` in the job's pod templates."""
    ordered = sorted(job.groups, key=lambda g: g.rtype not in ("Chief", "Master"))
    for group in ordered:
        spec = group.template.get("spec") or {}
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        mounts = [m for c in spec.get("containers") or [] for m in c.get("volumeMounts") or []]
        # The deepest mount that contains the log directory.
        for mount in sorted(mounts, key=lambda m: -len(m.get("mountPath", ""))):
            path = mount.get("mountPath", "").rstrip("/")
            if path and (log_dir == path or log_dir.startswith(path + "/")) and mount.get("name") in volumes:
                return copy.deepcopy(volumes[mount["name"]]), {
                    "name": mount["name"],
                    "mountPath": mount["mountPath"],
                    "readOnly": True,
                }
    raise InvalidJob(
        f"{LOG_DIR_ANNOTATION} {log_dir!r} is on no volume the job's pods mount: mount the log "
        "directory from a volume (e.g. a PersistentVolumeClaim) so TensorBoard can read it"
    )


def _pod_template(
    log_dir: str, image: str, selector: dict[str, str], volume: dict[str, Any], mount: dict[str, Any]
) -> dict[str, Any]:
    """TensorBoard's pod: it serves the log directory, read from the job's own volume."""
    command = ["tensorboard", "--logdir", log_dir, "--host", "0.0.0.0", "--port", str(PORT)]
    container = {
        "name": "tensorboard",
        "image": image,
        "command": command,
        "ports": [{"name": "tensorboard", "containerPort": PORT}],
        "volumeMounts": [mount],
    }
    return {"metadata": {"labels": dict(selector)}, "spec": {"containers": [container], "volumes": [volume]}}


def objects(job: Job, labels: dict[str, str], config: dict[str, Any]) -> list[dict[str, Any]]:
    """The TensorBoard Deployment and Service of the job, or ``[]`` when not requested."""
    log_dir = requested(job)
    if not log_dir:
        return []
    volume, mount = _log_volume(job, log_dir)
    selector = {POD_LABEL: label_value(job.name)}
    image = (
        (job.metadata.get("annotations") or {}).get(IMAGE_ANNOTATION)
        or config.get("tensorboard_image")
        or DEFAULT_IMAGE
    )
    meta = {
        "name": name(job.name),
        "namespace": job.namespace,
        # The job's labels, so the operator's observe step finds the Deployment and Service.
        "labels": dict(labels),
        "ownerReferences": [job.owner_reference],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(selector)},
            "template": _pod_template(log_dir, image, selector, volume, mount),
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": copy.deepcopy(meta),
        "spec": {
            "selector": dict(selector),
            "ports": [{"name": "tensorboard", "port": PORT, "targetPort": PORT}],
        },
    }
    return [deployment, service]
