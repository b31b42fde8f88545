"""The idle label: how a pass leaves a running job with nothing pending to the companion, and how
the companion reads what the pass left. Pure.

A pass that leaves an unfinished job with nothing pending labels it :data:`IDLE_LABEL` under the
resourceVersion it read (``training_job_apply``); ``watches.yaml``'s selector then leaves the job's
events to nobody, and the companion brings it back. The label's value says what the pass saw:

``<generation>-<annotations digest>-<pods digest>``

- the generation and a digest of the job's annotations (the companion's own left out): the
  companion removes the label when the job is edited while idle (:func:`edited_while_idle`);
- a digest of the pod signature the pass planned with (:func:`pods_digest`): the companion
  compares it with the pods it knows once the label lands (:func:`parked_behind`). A pass can read
  pods older than a wake that was already written before it read the job (the runtime's cache
  lags the companion's watch): its label write then succeeds, no later write of the companion
  changes the job, and nothing would bring it back. The comparison closes that window whatever
  the pass's speed: a pod change is either written by the companion after the pass read the job
  (the label write fails on the resourceVersion, or the wake removes the label) or known to the
  companion when the label lands.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from training_jobs.pod_signature import ANNOTATION

IDLE_LABEL = "training.ato.dev/idle"
# Written with the label's removal when an idle job was edited: the runtime's selector is only a
# filter on its events, and a label change alone passes none of them; an annotation change does.
EDITED_WHILE_IDLE = "training.ato.dev/edited-while-idle"
# Written with the label's removal when a job was labelled idle by a pass that planned with other
# pods than the companion knows (:func:`parked_behind`): the label's value and when.
PARKED_BEHIND = "training.ato.dev/parked-behind-pods"
# Written by the companion with the removal of both labels when a job's status holds a condition
# type that is not Kubeflow's (the Ansible runtime's Failure, conditions.kubeflow_only): that
# job's next pass drops it, and a finished or idle job gets no pass otherwise.
FOREIGN_CONDITIONS = "training.ato.dev/foreign-conditions"
# The companion's wake annotation on a TrainJob (trainer_jobs.observe.WAKE_ANNOTATION): the
# signature of its JobSet, where a v1 job's is of its pods (ANNOTATION).
JOBSET_SIGNATURE_ANNOTATION = "training.ato.dev/jobset-signature"
# The companion's annotations: writing them is no edit of the job.
COMPANION_ANNOTATIONS = (
    ANNOTATION,
    JOBSET_SIGNATURE_ANNOTATION,
    EDITED_WHILE_IDLE,
    PARKED_BEHIND,
    FOREIGN_CONDITIONS,
)


def _digest(text: str) -> str:
    return hashlib.blake2s(text.encode(), digest_size=4).hexdigest()


def pods_digest(signature: str) -> str:
    """A pod signature (``training_jobs.pod_signature.signature``) as the label carries it."""
    return _digest(signature)


def job_part(cr: dict[str, Any]) -> str:
    """The job's generation and a digest of its annotations (a TensorBoard's log dir is one),
    "" for a job without a generation."""
    meta = cr.get("metadata") or {}
    if not meta.get("generation"):
        return ""
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in COMPANION_ANNOTATIONS}
    return f"{meta['generation']}-{_digest(json.dumps(annotations, sort_keys=True))}"


def idle_value(cr: dict[str, Any], pods_signature: str) -> str:
    """What :data:`IDLE_LABEL` says of the job a pass labels, having planned with pods whose
    signature is ``pods_signature``; "" for a job without a generation."""
    part = job_part(cr)
    return f"{part}-{pods_digest(pods_signature)}" if part else ""


def _label(job: dict[str, Any]) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(IDLE_LABEL)


def edited_while_idle(job: dict[str, Any]) -> bool:
    """Whether a job labelled :data:`IDLE_LABEL` changed since the label was written. A label of
    an operator before the pods digest (``<generation>-<digest>``) is read the same way."""
    label = _label(job)
    if label is None:
        return False
    return "-".join(label.split("-")[:2]) != job_part(job)


def parked_pods(job: dict[str, Any]) -> str | None:
    """The pods digest of the job's idle label; None without the label, or for a label written
    before the digest was part of it."""
    label = _label(job)
    parts = (label or "").split("-")
    return parts[2] if len(parts) == 3 else None


def parked_behind(label: str, signature: str) -> bool:
    """Whether an idle label's pass planned with other pods than ``signature`` (what the
    companion knows of them now). A label without a pods digest says nothing."""
    parts = label.split("-")
    return len(parts) == 3 and parts[2] != pods_digest(signature)
