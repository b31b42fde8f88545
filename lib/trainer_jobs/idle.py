"""Whether a TrainJob's pass leaves it idle, and with which label value. Pure.

The idle label is the v1 kinds' (``training_jobs.idle``: ``<generation>-<annotations
digest>-<digest>``), with one difference: the last part digests the JobSet signature the pass
planned with (``trainer_jobs.observe.jobset_signature``) where a v1 job's digests its pods. A
TrainJob labelled idle is out of the runtime's watch (``watches.yaml``'s selector), so an operator
restart costs it no pass; the companion brings it back (``training_wake.jobsets``): the next change
of its JobSet is a wake whose write removes the label, an edit (a user's or Kueue's ``suspend`` and
runtime patches) is seen by its watch on idle TrainJobs, and a label written by a pass that read an
older JobSet than the companion knows is seen there too.

Only a pass with nothing pending leaves its TrainJob idle: managed here, not finished, nothing to
create, apply again or delete, no later look asked for, and a JobSet that its controller has
already reported on (a ``status``): the first report changes the signature, and that wake brings
the next pass anyway, so a label before it would be a write for nothing.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api
from trainer_jobs.observe import jobset_signature
from training_jobs.idle import IDLE_LABEL, idle_value


def wakes_on(config: dict[str, Any]) -> bool:
    """Whether the companion wakes TrainJobs (``config["wake"]``, templated: maybe a string):
    without it nothing would bring an idle TrainJob back."""
    return str(config.get("wake", "")).lower() in ("true", "1", "yes")


def idle_label(
    trainjob: dict[str, Any], jobset: dict[str, Any] | None, config: dict[str, Any], pending: bool
) -> str:
    """The value of ``IDLE_LABEL`` a pass leaves on ``trainjob`` (see the module's docstring),
    or "". ``pending``: the pass writes an object, asks for a later look, or finds the TrainJob
    finished or not managed here."""
    if pending or not wakes_on(config) or jobset is None or not jobset.get("status"):
        return ""
    if IDLE_LABEL in (api.meta(trainjob).get("labels") or {}):
        return ""
    return idle_value(trainjob, jobset_signature(jobset))
