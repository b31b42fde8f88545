"""TrainJobs in the operator's job counters (training-operator's names; ``docs/monitoring.md``),
driven by real TrainJobs on a real JobSet: kind ``TrainJob``, group ``trainer.kubeflow.org``,
framework the runtime's ``trainer.kubeflow.org/framework`` label. Upstream's Trainer v2.3 has no
job metrics at all (trainer#3429 asks for them); the dashboard's panels are per kind, so a
TrainJob is one more line in each.

The namespace is this module's own, so its counters start at zero and must end at exactly what
these TrainJobs did: a pass retried after a conflict must not count twice.
"""

from __future__ import annotations

import os
import re
import urllib.request
import uuid
from functools import partial

import pytest
import trainjobs
from kube import namespace_fixture, wait_for

pytestmark = pytest.mark.trainer

NS = f"ato-trainer-metrics-{uuid.uuid4().hex[:6]}"
METRICS_URL = f"http://{os.environ.get('JOB_METRICS_BIND', '127.0.0.1:8686')}/metrics"
namespace = namespace_fixture(NS)
create_trainjob = partial(trainjobs.create, NS)
trainjob = partial(trainjobs.trainjob, NS)


def counter(metric: str, framework: str) -> int:
    with urllib.request.urlopen(METRICS_URL, timeout=5) as resp:
        text = resp.read().decode()
    pattern = (
        rf'^training_operator_jobs_{metric}_total\{{job_namespace="{NS}",framework="{framework}",'
        rf'kind="TrainJob",group="trainer.kubeflow.org"\}} (\d+)$'
    )
    match = re.search(pattern, text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def state(name: str) -> str:
    conditions = (trainjob(name).get("status") or {}).get("conditions") or []
    return next(
        (c["type"] for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"), ""
    )


def finished_label(name: str) -> bool:
    return "training.ato.dev/finished" in (trainjob(name)["metadata"].get("labels") or {})


def test_trainjobs_are_counted_by_kind_and_their_runtimes_framework(namespace):
    create_trainjob("counted", "torch-distributed", {"numNodes": 2})
    trainjobs.running(NS, "counted", 2)
    trainjobs.finish(NS, "counted")
    # Failed by its deadline (1 s) before or after its JobSet exists, whichever the pass sees.
    create_trainjob("late", "jax-distributed", {"numNodes": 1}, activeDeadlineSeconds=1)
    for name, end in (("counted", "Complete"), ("late", "Failed")):
        wait_for(lambda n=name, e=end: state(n) == e and finished_label(n), what=f"{name} {end} and labelled")
    assert (counter("created", "torch"), counter("successful", "torch"), counter("failed", "torch")) == (
        1,
        1,
        0,
    )
    assert counter("failed", "jax") == 1 and counter("successful", "jax") == 0
    assert counter("created", "trainjob") == 0, "a TrainJob counted without its runtime's framework"
