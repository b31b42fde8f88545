"""The runtime snapshot: the runtime a TrainJob was first built from, kept beside it.

Trainer v2.3 (``pkg/runtime/core/snapshot.go``) stores the runtime it first reads for a TrainJob
in the ConfigMap ``<name>-runtime-snapshot`` (key ``runtime``), owned by the TrainJob, and builds
every later pass from that copy, so editing or deleting a runtime never changes a TrainJob
already made from it. A snapshot is used only if the TrainJob is its controller and it names the
runtime the TrainJob refers to (kind, group and name); otherwise upstream's error is raised.

Upstream writes the runtime as YAML (``sigs.k8s.io/yaml``); the engine writes JSON, which is
YAML too and which upstream's reader parses, so the same snapshot serves both operators across a
swap. The engine reads JSON itself; a YAML snapshot (written by upstream) must be parsed by the
observe step and handed over (``observed["runtime_snapshot"]``): the engine imports no YAML.
The runtime's ``managedFields`` are left out of the copy (nothing reads them).
Upstream marshals the runtime through its Go types, which write an empty struct field (a
template's ``metadata``, a container's ``resources``) as ``{}``; the copy here keeps the runtime
as the API server serves it, without them. Both read back as the same runtime
(``docs/upgrade-notes.md``, Trainer v2; ``tests/trainer/test_side_by_side.py`` accepts it).
"""

from __future__ import annotations

import json
from typing import Any

from trainer_jobs import api

SUFFIX = "-runtime-snapshot"
DATA_KEY = "runtime"


class SnapshotError(Exception):
    """The snapshot ConfigMap exists but cannot be used (upstream's error, word for word)."""


def name_of(trainjob: dict[str, Any]) -> str:
    return f"{api.meta(trainjob).get('name', '')}{SUFFIX}"


def config_map(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The snapshot ConfigMap of ``runtime`` for ``trainjob``."""
    metadata = {k: v for k, v in api.meta(runtime).items() if k != "managedFields"}
    copy = {
        "apiVersion": runtime.get("apiVersion", api.API_VERSION),
        "kind": runtime.get("kind", ""),
        "metadata": metadata,
    }
    if "spec" in runtime:
        copy["spec"] = runtime["spec"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": api.owned_metadata(trainjob, name_of(trainjob)),
        "data": {DATA_KEY: json.dumps(copy, sort_keys=True, separators=(",", ":"))},
    }


def _controller_uid(obj: dict[str, Any]) -> str | None:
    refs = [r for r in api.meta(obj).get("ownerReferences") or [] if r.get("controller")]
    return refs[0].get("uid") if refs else None


def runtime_of(
    trainjob: dict[str, Any], cm: dict[str, Any], parsed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The runtime stored in snapshot ConfigMap ``cm`` (``getRuntimeSnapshot``)."""
    if _controller_uid(cm) != api.meta(trainjob).get("uid"):
        raise SnapshotError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    data = (cm.get("data") or {}).get(DATA_KEY)
    if data is None:
        raise SnapshotError(f'invalid runtime snapshot: snapshot ConfigMap missing "{DATA_KEY}" data key')
    runtime = parsed
    if runtime is None:
        try:
            runtime = json.loads(data)
        except ValueError as err:
            raise SnapshotError(f"invalid runtime snapshot: unable to unmarshal the snapshot: {err}") from err
    if not isinstance(runtime, dict):
        raise SnapshotError("invalid runtime snapshot: unable to unmarshal the snapshot: not an object")
    _check_refers(trainjob, runtime)
    return runtime


def _check_refers(trainjob: dict[str, Any], runtime: dict[str, Any]) -> None:
    group, kind, name = api.runtime_ref(trainjob)
    got_group = str(runtime.get("apiVersion", "")).rpartition("/")[0]
    got_kind, got_name = runtime.get("kind", ""), api.meta(runtime).get("name", "")
    if (kind, group, name) != (got_kind, got_group, got_name):
        raise SnapshotError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a runtime with name, "
            f'api group and kind of "{name}", "{group}", "{kind}" but found runtime with name, api group and kind '
            f'of "{got_name}", "{got_group}", "{got_kind}"'
        )
