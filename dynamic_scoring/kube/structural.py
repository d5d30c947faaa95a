"""A CRD's structural schema, checked offline the way the apiserver checks an object on a strict apply.

Why.  ``kubectl apply`` asks for strict field validation, so the apiserver refuses a DynamicScorer with a
field its CRD does not declare (``spec.sourse``), a value of the wrong type, out of bounds or outside an
enum.  An offline check that skips this says "0 errors" for a file the cluster rejects.  This module
walks the subset of OpenAPI v3 that the project's CRDs use: ``type``, ``properties``,
``additionalProperties``, ``required``, ``enum``, ``minimum``/``maximum`` (with ``exclusiveMinimum``/
``exclusiveMaximum``), ``minLength``/``maxLength``, ``pattern``, ``minItems``/``maxItems``,
``maxProperties``, ``items`` and ``x-kubernetes-preserve-unknown-fields``.  It reports every finding,
not the first, and an unknown field with the closest declared name.

Not checked here: ``x-kubernetes-validations`` (CEL rules; the hub's own model and resolution carry
the same rules and run after this), ``format`` and the content of ``metadata`` (the apiserver's own
ObjectMeta rules).  Written by hand rather than with a JSON Schema library because Kubernetes' dialect
differs (unknown fields are errors unless preserved, ``exclusiveMinimum`` is a boolean, the messages
name fields as kubectl does) and the subset is small.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
"""The ``type`` values of OpenAPI v3; any other is not checked."""


@dataclass(frozen=True)
class SchemaIssue:
    """One thing the apiserver would refuse: the field's path and what is wrong with it."""

    field: str
    message: str


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _is(value: Any, wanted: str) -> bool:
    kind = _kind(value)
    return wanted not in _TYPES or kind == wanted or (wanted, kind) == ("number", "integer")


def suggestion(name: str, known: list[str]) -> str | None:
    """The declared name ``name`` most likely meant: the same but for case, else the closest spelling."""
    for candidate in known:
        if candidate.lower() == name.lower():
            return candidate
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _shown(value: Any) -> str:
    """A short rendering of a scalar for a message (strings quoted, long ones cut)."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(schema: Mapping[str, Any], value: Any, path: str = "") -> list[SchemaIssue]:
    """Every issue of ``value`` against ``schema``; field paths start at ``path`` (``spec``)."""
    return list(_walk(schema, value, path))


def _walk(schema: Mapping[str, Any], value: Any, path: str) -> Iterator[SchemaIssue]:
    where = path or "<root>"
    wanted = schema.get("type")
    if isinstance(wanted, str) and not _is(value, wanted):
        yield SchemaIssue(where, f"must be of type {wanted}, not {_kind(value)}")
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_shown(v) for v in schema["enum"])
        yield SchemaIssue(where, f"must be one of {allowed} (is {_shown(value)})")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield from _bounds(schema, value, where)
    if isinstance(value, str):
        yield from _string(schema, value, where)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield SchemaIssue(where, f"must have at least {schema['minItems']} item(s) (has {len(value)})")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield SchemaIssue(where, f"must have at most {schema['maxItems']} items (has {len(value)})")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                yield from _walk(items, item, f"{path}[{i}]")
    if isinstance(value, Mapping):
        yield from _object(schema, value, path, where)


def _bounds(schema: Mapping[str, Any], value: float, where: str) -> Iterator[SchemaIssue]:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None:
        if schema.get("exclusiveMinimum") is True and value <= low:
            yield SchemaIssue(where, f"must be greater than {low} (is {value})")
        elif value < low:
            yield SchemaIssue(where, f"must be at least {low} (is {value})")
    if high is not None:
        if schema.get("exclusiveMaximum") is True and value >= high:
            yield SchemaIssue(where, f"must be less than {high} (is {value})")
        elif value > high:
            yield SchemaIssue(where, f"must be at most {high} (is {value})")


def _string(schema: Mapping[str, Any], value: str, where: str) -> Iterator[SchemaIssue]:
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield SchemaIssue(where, f"must be at least {schema['minLength']} character(s) long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield SchemaIssue(where, f"must be at most {schema['maxLength']} characters long (is {len(value)})")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and re.search(pattern, value) is None:
        yield SchemaIssue(where, f"must match {pattern} (is {_shown(value)})")


def _object(
    schema: Mapping[str, Any], value: Mapping[str, Any], path: str, where: str
) -> Iterator[SchemaIssue]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            yield SchemaIssue(f"{path}.{name}" if path else name, "required")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        yield SchemaIssue(where, f"must have at most {schema['maxProperties']} entries (has {len(value)})")
    extra = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    for name, item in value.items():
        child = f"{path}.{name}" if path else str(name)
        if name in properties:
            if name == "metadata" and not path:
                continue  # ObjectMeta: the apiserver's own rules, not the CRD's
            yield from _walk(properties[name], item, child)
        elif isinstance(extra, Mapping):
            yield from _walk(extra, item, child)
        elif extra is True or preserve or (not properties and "type" not in schema):
            continue
        else:
            known = sorted(properties)
            guess = suggestion(str(name), known)
            hint = f"; did you mean {guess!r}?" if guess else ""
            yield SchemaIssue(child, f"unknown field (not in the CRD){hint}")


__all__ = ["SchemaIssue", "check", "suggestion"]
