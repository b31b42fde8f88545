"""The operator's job counters, with training-operator's names and labels.

ansible-operator's own metrics API (``localhost:5050``, used by ``osdk_metric``) registers only
label-less metrics, so counters *per kind and namespace* cannot live there. They live in this
small registry instead, served by :mod:`training_metrics.server` beside the runtime (a sidecar
container in the operator pod, a background process under ``make run``).

The names and the ``job_namespace`` / ``framework`` labels are training-operator's
(``pkg/common/metrics.go``), so its dashboards and alerts keep working; ``kind`` is added
because it is the name users of this operator know a job by, and ``group`` because two kinds
share that name (training-operator's PaddleJob in ``kubeflow.org``, paddle-operator's in
``batch.paddlepaddle.org``).

Pure: no I/O. Counters start at zero when the process starts, as every Prometheus counter.
"""

from __future__ import annotations

import threading
from typing import Any

PREFIX = "training_operator_jobs_"
# The observation name (what a reconcile plan reports) -> its help text.
METRICS = {
    "created": "Jobs created (the operator saw them for the first time and marked them Created).",
    "successful": "Jobs that finished with the Succeeded condition.",
    "failed": "Jobs that finished with the Failed condition.",
    "restarted": "Failed pods the operator deleted to be recreated under their restart policy.",
    "deleted": "Jobs deleted by the operator after ttlSecondsAfterFinished.",
}
LABELS = ("job_namespace", "framework", "kind", "group")
Labels = tuple[str, str, str, str]


class ObservationError(ValueError):
    """An observation that names no known counter or lacks a label."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def parse_observation(body: Any) -> tuple[Labels, dict[str, int]]:
    """``{"namespace", "framework", "kind", "group", "counts": {metric: n}}`` -> (labels, counts).

    Raises :class:`ObservationError` on anything else, so a bad caller is told, not ignored.
    """
    if not isinstance(body, dict):
        raise ObservationError("an observation is a JSON object")
    labels = []
    for field in ("namespace", "framework", "kind", "group"):
        value = body.get(field)
        if not isinstance(value, str) or not value:
            raise ObservationError(f"{field} must be a non-empty string")
        labels.append(value)
    counts = body.get("counts")
    if not isinstance(counts, dict) or not counts:
        raise ObservationError("counts must be a non-empty object")
    for metric, n in counts.items():
        if metric not in METRICS:
            raise ObservationError(f"unknown counter {metric!r}; known: {', '.join(METRICS)}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ObservationError(f"{metric} must be a non-negative integer")
    return (labels[0], labels[1], labels[2], labels[3]), counts


class Counters:
    """Thread-safe counters keyed by (metric, labels)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[Labels, int]] = {m: {} for m in METRICS}

    def add(self, labels: Labels, counts: dict[str, int]) -> None:
        with self._lock:
            for metric, n in counts.items():
                series = self._values[metric]
                series[labels] = series.get(labels, 0) + n

    def value(self, metric: str, labels: Labels) -> int:
        with self._lock:
            return self._values[metric].get(labels, 0)

    def render(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        lines = []
        with self._lock:
            snapshot = {m: dict(v) for m, v in self._values.items()}
        for metric, help_text in METRICS.items():
            name = f"{PREFIX}{metric}_total"
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} counter")
            for labels, value in sorted(snapshot[metric].items()):
                pairs = ",".join(f'{LABELS[i]}="{_escape(v)}"' for i, v in enumerate(labels))
                lines.append(f"{name}{{{pairs}}} {value}")
        return "\n".join(lines) + "\n"
