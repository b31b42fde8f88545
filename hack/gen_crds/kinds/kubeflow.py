"""The shape of every training-operator v1 kind: a replica-spec map, a run policy, a few fields."""

from __future__ import annotations

from typing import Any

from ..admission import map_policy
from ..common import (
    RUN_POLICY_RULES,
    ReplicaKeys,
    dns1035_rule,
    job_status,
    map_name_length_rule,
    replica_map,
    replica_spec,
    run_policy,
)
from ..kind import AGE_COLUMN, STATE_COLUMN, Kind
from ..schema import Schema, obj


def kubeflow_kind(
    kind: str,
    field_name: str,
    types: list[str],
    container: str,
    description: str,
    rules: list[dict[str, Any]],
    restart_default: str = "Never",
    why: str = "",
    extra: dict[str, Schema] | None = None,
    spec_rules: list[dict[str, Any]] | None = None,
    replica: Schema | None = None,
    short_names: list[str] | None = None,
    lead: dict[str, Schema] | None = None,
    keys: ReplicaKeys | None = None,
    **kind_fields: Any,
) -> Kind:
    """A training-operator v1 kind: a replica-spec map, a run policy and ``extra`` spec fields
    (``lead`` ones before the map). ``rules`` are the map's, ``spec_rules`` the spec's. ``keys``
    says which replica types take a key in any case (none unless given: upstream refuses them)."""
    replica = replica or replica_spec(kind, restart_default, f"Defaults to {restart_default}.")
    keys = keys or ReplicaKeys(types)
    specs = replica_map(field_name, kind, keys, replica, rules)
    return Kind(
        group="kubeflow.org",
        version="v1",
        kind=kind,
        plural=f"{kind.lower()}s",
        short_names=short_names or [],
        description=description,
        spec=obj(
            f"Desired state of the {kind}.",
            {**(lead or {}), field_name: specs, "runPolicy": run_policy(), **(extra or {})},
            required=[field_name],
            rules=[*RUN_POLICY_RULES, *(spec_rules or [])],
        ),
        status=job_status(kind),
        root_rules=[dns1035_rule(), map_name_length_rule(f"self.spec.{field_name}")],
        columns=[STATE_COLUMN, AGE_COLUMN],
        policy=map_policy(
            field_name,
            types,
            keys.folded,
            container,
            why or f"the operator reads the {kind.lower()}-port from it",
        ),
        **kind_fields,
    )
