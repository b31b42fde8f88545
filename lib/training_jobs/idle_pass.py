"""Whether a pass leaves its job idle (``training_jobs.idle``: the label and how the companion
reads it), decided from the pass's state. Pure."""

from __future__ import annotations

from typing import Any

from training_jobs import conditions as cond
from training_jobs import idle, pod_signature
from training_jobs.passes import Pass


def idle_label(p: Pass) -> str:
    """The value of ``idle.IDLE_LABEL`` this pass leaves on the job (:func:`idle.idle_value`: its
    generation, annotations and the pods it planned with), or "".

    Only with the companion's wakes on (``config["wake"]``: they are what brings an idle job
    back) and without a poll, and only when nothing is pending: a job that asked for a later
    look, or that this pass creates, patches or deletes for, stays watched, and so does a job
    whose pods are still starting (:func:`on_its_way`).
    """
    config = p.config
    wake = str(config.get("wake", "")).lower() in ("true", "1", "yes")  # templated: maybe a string
    if not wake or int(config.get("poll_seconds") or 0) > 0 or not p.may_idle:
        return ""
    if p.final or cond.is_finished(p.conditions) or p.requeue or p.delete_job:
        return ""
    if p.create or p.update or p.delete or p.recreating:
        return ""
    if idle.IDLE_LABEL in ((p.cr.get("metadata") or {}).get("labels") or {}):
        return ""
    if any(on_its_way(pod) for pod in p.pods.values()):
        return ""
    return idle.idle_value(p.cr, pod_signature.signature_of_pods(list(p.pods.values())))


def on_its_way(pod: dict[str, Any]) -> bool:
    """A pod still starting, with no problem to report: its next state (running, or a problem)
    changes the job's pod signature, and that wake brings the next pass anyway. Labelling the
    job idle before would be a write for nothing, once per batch of pods that start."""
    phase, _, problems = pod_signature.pod_state(pod)
    return phase == "Pending" and not problems
