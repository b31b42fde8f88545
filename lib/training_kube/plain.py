"""Ansible's unsafe and tagged types (its ``str``, ``int`` and ``float`` subclasses, the
templated values a filter or an action plugin receives) turned into plain JSON-able data, so the
engines and the HTTP client see ordinary types only."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)
