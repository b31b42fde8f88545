"""The one internal job model shared by every job kind.

A framework profile (``profiles/``) turns its kind's spec into a :class:`Job`: the
replica groups in a fixed order, each with its replica count, restart policy and pod
template, plus the common run policy. Everything downstream (pod names, env, status rules,
the reconcile plan) works on this model only, never on a kind's raw spec layout. The typed
references and events a plan carries to the apply step (``ObjectRef``, ``PlanEvent``) are here
too, so the modules that make them need not import the planner.

This package is deliberately not a Python package Ansible would scan (no ``__init__.py``):
Ansible loads ``filter_plugins/*.py`` as plugins, and these modules are imported by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

# Replica restart policies (training-operator's ReplicaSpec.restartPolicy values).
RESTART_ALWAYS = "Always"
RESTART_ON_FAILURE = "OnFailure"
RESTART_NEVER = "Never"
RESTART_EXIT_CODE = "ExitCode"
RESTART_POLICIES = (RESTART_ALWAYS, RESTART_ON_FAILURE, RESTART_NEVER, RESTART_EXIT_CODE)

# Where a profile's env contract goes inside a pod.
ENV_DEFAULT_CONTAINER = "default"  # only the framework's named container (TF_CONFIG)
ENV_ALL_CONTAINERS = "all"  # every container (DMLC_*, Caffe2)
ENV_FIRST_CONTAINER = "first"  # containers[0] only (paddle-operator)


@dataclass(frozen=True)
class ReplicaGroup:
    """One replica type of a job: ``Worker`` of a TFJob, ``ps`` of a PaddleJob, ...

    ``rtype`` is the type as the kind's API names it (the map key or field name; a map key
    upstream's defaulter camel-cases, such as ``worker``, is its type ``Worker``); ``label`` is
    the lower-case form used in pod names and labels.
    """

    rtype: str
    label: str
    replicas: int
    restart_policy: str
    template: dict[str, Any]

    @property
    def containers(self) -> list[dict[str, Any]]:
        return list((self.template.get("spec") or {}).get("containers") or [])


@dataclass(frozen=True)
class Job:
    """A job of any kind, normalised by its profile."""

    kind: str
    api_version: str
    name: str
    namespace: str
    uid: str
    spec: dict[str, Any]
    status: dict[str, Any]
    metadata: dict[str, Any]
    groups: tuple[ReplicaGroup, ...]
    run_policy: dict[str, Any] = field(default_factory=dict)

    def group(self, rtype: str) -> ReplicaGroup | None:
        for g in self.groups:
            if g.rtype == rtype:
                return g
        return None

    @property
    def total_replicas(self) -> int:
        return sum(g.replicas for g in self.groups)

    @property
    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


class InvalidJob(ValueError):
    """The job cannot be run as written; the message tells the user what to change."""


# What a pass hands the apply step besides whole objects (plan.Plan holds them).


class ObjectRef(TypedDict):
    """An object the apply step deletes: addressed by kind and name, ``force`` for no grace period."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None
    force: NotRequired[bool]


class PlanEvent(TypedDict):
    """An event the apply step records on the job; with ``about`` ("Kind/name") only if that
    object's create or delete really happened."""

    type: str
    reason: str
    message: str
    about: NotRequired[str]
