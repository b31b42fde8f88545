"""Filters that make a TrainJob's decisions; ``roles/trainjob`` only applies what these return.

- ``cr | trainjob_observe_args`` - what the pass reads (``trainer_jobs.observe.reads``).
- ``cr | trainjob_plan(observed, config, now)`` - one pass (``trainer_jobs.plan.plan``): what
  to apply, create and delete, the new status, events, when to look again. ``observed`` is the
  observe task's ``objects``, the runtime among them.

Pure functions of their arguments, results marked unsafe (``wrap_var``) as the v1 kinds' are
(``training_job.py`` says why, and why the engine lives in ``lib/``).
"""

from __future__ import annotations

import os
import sys

from ansible.utils.unsafe_proxy import wrap_var

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

from trainer_jobs.observe import UNAVAILABLE, reads, unavailable_plan
from trainer_jobs.plan import plan
from training_kube.plain import plain


def trainjob_observe_args(cr):
    return wrap_var(reads(plain(cr)))


def trainjob_plan(cr, observed, config=None, now=""):
    observed = plain(observed or {})
    if UNAVAILABLE in observed:
        return wrap_var(unavailable_plan())
    runtime = observed.pop("runtime", None)
    return wrap_var(plan(plain(cr), runtime, observed, plain(config or {}), str(now) or None))


class FilterModule:
    def filters(self):
        return {
            "trainjob_observe_args": trainjob_observe_args,
            "trainjob_plan": trainjob_plan,
        }
