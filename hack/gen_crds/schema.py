"""Schema building blocks: typed fields with their descriptions, CEL rules, quantities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

Schema = dict[str, Any]

# core/v1 Quantity as controller-gen writes it: an int-or-string with Kubernetes' quantity syntax.
QUANTITY: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
    "x-kubernetes-int-or-string": True,
}


def _field(description: str, kind: str, rules: list[dict[str, Any]] | None, extra: dict[str, Any]) -> Schema:
    out: Schema = {"description": description, "type": kind, **extra}
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def string(description: str, *, rules: list[dict[str, Any]] | None = None, **extra: Any) -> Schema:
    return _field(description, "string", rules, extra)


def integer(description: str, fmt: str = "int32", **extra: Any) -> Schema:
    return _field(description, "integer", None, {"format": fmt, **extra})


def boolean(description: str, **extra: Any) -> Schema:
    return _field(description, "boolean", None, extra)


def timestamp(description: str) -> Schema:
    return string(description, format="date-time")


def obj(
    description: str,
    properties: dict[str, Schema],
    required: list[str] | None = None,
    *,
    rules: list[dict[str, Any]] | None = None,
    map_type: str | None = None,
) -> Schema:
    out: Schema = {"description": description, "type": "object", "properties": properties}
    if required:
        out["required"] = required
    if map_type:
        out["x-kubernetes-map-type"] = map_type
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def rule(expr: str, message: str, message_expression: str | None = None, **extra: Any) -> dict[str, Any]:
    """One CEL rule. ``message`` is the fallback when ``messageExpression`` yields nothing."""
    out: dict[str, Any] = {"rule": expr, "message": message}
    if message_expression:
        out["messageExpression"] = message_expression
    out.update(extra)
    return out


def quantity_map(description: str) -> Schema:
    """Same shape as core/v1 ResourceList: quantities by resource name."""
    return {"description": description, "type": "object", "additionalProperties": dict(QUANTITY)}


def described(description: str, schema: Schema, **extra: Any) -> Schema:
    """``schema`` (an API type's, without text) with a description first and ``extra`` keywords."""
    return {"description": description, **schema, **extra}
