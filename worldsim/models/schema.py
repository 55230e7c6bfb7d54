"""JSON schemas for structured outputs: strict-mode shaping, string limits, prompt text, parsing.

The schema a server sees is only a constraint on decoding; every reply is validated again with
the pydantic output model, which carries the real bounds.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

from pydantic import BaseModel

from worldsim.models.call import output_schema

__all__ = [
    "DEFAULT_MAX_STRING_LENGTH",
    "extract_json",
    "limit_string_lengths",
    "response_schema",
    "schema_instructions",
    "schema_name",
    "strict_schema",
]

DEFAULT_MAX_STRING_LENGTH = 2000

# Keywords OpenAI's strict mode accepts; a schema using anything else is sent with strict false.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "$ref", "$defs", "description", "title", "default", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minItems", "maxItems",
    }
)  # fmt: skip


def schema_name(output_type: type[BaseModel]) -> str:
    """A response-format name: letters, digits, ``_`` and ``-``, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", output_type.__name__)[:64] or "output"


def limit_string_lengths(
    schema: dict[str, Any], max_length: int = DEFAULT_MAX_STRING_LENGTH
) -> dict[str, Any]:
    """A copy of ``schema`` with ``maxLength`` (at most ``max_length``) on every string, so a
    reply cannot run past the token limit inside one field. Tighter existing limits stay."""
    out = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if _has_type(node, "string") and "enum" not in node and "const" not in node:
                node["maxLength"] = min(int(node.get("maxLength", max_length)), max_length)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(out)
    return out


def strict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Shape ``schema`` for strict mode: every object closed (``additionalProperties: false``)
    with every property required. Returns the shaped copy and whether strict mode can accept it
    (no open maps, no keywords outside the strict subset)."""
    out = copy.deepcopy(schema)
    ok = True

    def visit(node: Any) -> None:
        nonlocal ok
        if isinstance(node, dict):
            if _has_type(node, "object"):
                props = node.get("properties")
                extra = node.get("additionalProperties")
                if isinstance(props, dict) and extra in (None, False):
                    node["additionalProperties"] = False
                    node["required"] = list(props)
                else:
                    ok = False
            for key, value in node.items():
                if key in ("properties", "$defs"):
                    if isinstance(value, dict):
                        for sub in value.values():
                            visit(sub)
                    continue
                if key not in _STRICT_KEYWORDS:
                    ok = False
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(out)
    return out, ok


def response_schema(
    output_type: type[BaseModel], *, max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH
) -> tuple[dict[str, Any], bool]:
    """The schema sent for ``output_type`` (a fresh copy, safe to edit) and whether it
    qualifies for strict mode."""
    text, ok = _response_schema_text(output_type, max_string_length)
    return json.loads(text), ok


@functools.lru_cache(maxsize=512)
def _response_schema_text(
    output_type: type[BaseModel], max_string_length: int | None
) -> tuple[str, bool]:
    # Shaped once per output model and limit: the two deep copies and walks cost more than
    # a call's own work on the client side, and every call of a role asks for the same schema.
    schema = output_schema(output_type)
    if max_string_length is not None:
        schema = limit_string_lengths(schema, max_string_length)
    shaped, ok = strict_schema(schema)
    return json.dumps(shaped), ok


def schema_instructions(schema: dict[str, Any]) -> str:
    """The system-prompt text that carries the schema when the server cannot enforce it."""
    return (
        "Reply with a single JSON object and nothing else: no prose, no code fences. "
        "It must validate against this JSON schema:\n" + json.dumps(schema, indent=None)
    )


def extract_json(text: str) -> str:
    """The JSON object inside a reply: code fences and text around the outermost braces removed.
    Returns the text unchanged when it holds no braces, so validation reports the real reply."""
    stripped = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", stripped, re.DOTALL)
    if fence:
        stripped = fence.group(1)
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        return stripped[start : end + 1]
    return stripped


def _has_type(node: dict[str, Any], name: str) -> bool:
    kind = node.get("type")
    return kind == name or (isinstance(kind, list) and name in kind)
