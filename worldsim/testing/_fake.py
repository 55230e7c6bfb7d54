"""Deterministic, schema-valid values invented from a JSON schema and a seeded RNG."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

__all__ = ["fake_value"]

_WORDS = (
    "regulator", "merger", "review", "market", "signal", "delay", "approval", "pressure",
    "coalition", "filing", "outcome", "deadline", "hearing", "vote", "report", "shift",
)  # fmt: skip
_MAX_DEPTH = 8


def fake_value(schema: Mapping[str, Any], rng: random.Random) -> Any:
    """A value that validates against ``schema``: bounds, enums, consts, required properties,
    ``$ref``/``$defs``, ``anyOf``, arrays and string lengths are respected."""
    return _value(schema, schema, rng, 0)


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part]
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, root)


def _value(node: Mapping[str, Any], root: Mapping[str, Any], rng: random.Random, depth: int) -> Any:
    node = _resolve(node, root)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return rng.choice(list(node["enum"]))
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and options:
            non_null = [o for o in options if _resolve(o, root).get("type") != "null"]
            return _value(rng.choice(non_null or options), root, rng, depth + 1)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of:
        merged: dict[str, Any] = {}
        for part in all_of:
            merged.update(_resolve(part, root))
        return _value(merged, root, rng, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "string"
    if kind == "object":
        return _object(node, root, rng, depth)
    if kind == "array":
        return _array(node, root, rng, depth)
    if kind == "string":
        return _string(node, rng)
    if kind == "integer":
        return _integer(node, rng)
    if kind == "number":
        return _number(node, rng)
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def _object(
    node: Mapping[str, Any], root: Mapping[str, Any], rng: random.Random, depth: int
) -> dict[str, Any]:
    props = node.get("properties") or {}
    required = set(node.get("required") or ())
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if depth >= _MAX_DEPTH and name not in required:
            continue
        out[name] = _value(sub, root, rng, depth + 1)
    return out


def _array(
    node: Mapping[str, Any], root: Mapping[str, Any], rng: random.Random, depth: int
) -> list[Any]:
    low = int(node.get("minItems", 0 if depth >= _MAX_DEPTH else 1))
    high = int(node.get("maxItems", low + 2))
    items = node.get("items") or {}
    count = rng.randint(low, max(low, min(high, low + 2)))
    return [_value(items, root, rng, depth + 1) for _ in range(count)]


def _string(node: Mapping[str, Any], rng: random.Random) -> str:
    fmt = node.get("format")
    if fmt == "date":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z"
    low = int(node.get("minLength", 0))
    high = int(node.get("maxLength", max(low, 60)))
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))
    while len(text) < low:
        text += " " + rng.choice(_WORDS)
    return text[: max(low, min(high, len(text)))]


def _bounds(
    node: Mapping[str, Any], default: tuple[float, float]
) -> tuple[float, float, bool, bool]:
    low, high = default
    low_open = high_open = False
    if "minimum" in node:
        low = float(node["minimum"])
    if "exclusiveMinimum" in node:
        low, low_open = float(node["exclusiveMinimum"]), True
    if "maximum" in node:
        high = float(node["maximum"])
    if "exclusiveMaximum" in node:
        high, high_open = float(node["exclusiveMaximum"]), True
    if high < low:
        high = low + (default[1] - default[0])
    return low, high, low_open, high_open


def _integer(node: Mapping[str, Any], rng: random.Random) -> int:
    low, high, low_open, high_open = _bounds(node, (0, 100))
    lo = math.floor(low) + 1 if low_open else math.ceil(low)
    hi = math.ceil(high) - 1 if high_open else math.floor(high)
    return rng.randint(lo, max(lo, hi))


def _number(node: Mapping[str, Any], rng: random.Random) -> float:
    low, high, low_open, high_open = _bounds(node, (0.0, 1.0))
    span = high - low
    lo = low + span * 0.01 if low_open else low
    hi = high - span * 0.01 if high_open else high
    if hi <= lo:
        return lo
    value = rng.uniform(lo, hi)
    rounded = round(value, 4)
    return rounded if lo <= rounded <= hi else value
