"""Filters that make the operator's decisions; the roles only apply what these return.

- ``cr | training_job_observe_args(config)`` - which objects of the job to read, and by which labels.
- ``cr | training_job_plan(observed, config, now)`` - one reconcile pass: objects to create and
  delete, the new status, events, when to look again (see ``training_jobs/plan.py``).

The apply action plugin also calls the engine's ``rejected_plan`` when the API server refuses
some of the job's objects: the job then fails with the API's reason and what was created goes.

All are pure functions of their arguments. Their results are marked unsafe (``wrap_var``): they
carry the user's strings (commands, env values), which Ansible must never template, just as
``markUnsafe`` protects them on the way in. The logic lives in the ``training_jobs`` package in
``lib/`` beside this directory: Ansible loads every ``*.py`` file up to two directory levels below
a plugin path as a plugin, so the package cannot live inside ``filter_plugins/``.
"""

from __future__ import annotations

import os
import sys

from ansible.utils.unsafe_proxy import wrap_var

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

from training_jobs.plan import observe_args, plan
from training_kube.plain import plain


def training_job_observe_args(cr, config=None):
    """The engine's reads, plus the settings (``config``) as templated here: the observe task
    hands them on in its result, so the pass templates training_job_config (about twenty
    templates and lookups) once, not once per task."""
    settings = plain(config or {})
    return wrap_var({**observe_args(plain(cr), settings), "config": settings})


def training_job_plan(cr, observed, config=None, now=""):
    return wrap_var(plan(plain(cr), plain(observed or {}), plain(config or {}), str(now)))


class FilterModule:
    def filters(self):
        return {
            "training_job_observe_args": training_job_observe_args,
            "training_job_plan": training_job_plan,
        }
