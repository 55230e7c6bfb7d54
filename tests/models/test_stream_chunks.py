"""Replies, streamed or whole, are read as plain JSON, whatever shape they arrive in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from worldsim.models.call import Usage
from worldsim.models.stream import StreamState, read_stream, reply_from_json


async def _chunks(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def _read(items: list[Any]) -> tuple[Any, StreamState, int]:
    state = StreamState()
    seen = 0

    def progress() -> None:
        nonlocal seen
        seen += 1

    reply = await read_stream(
        _chunks(items), 2, lambda s: s.replace("sk-x", "[key]"), state, progress
    )
    return reply, state, seen


@pytest.mark.asyncio
async def test_text_tool_calls_usage_and_ids_are_assembled() -> None:
    reply, state, seen = await _read(
        [
            {"id": "c1", "model": "m", "choices": [{"delta": {"content": "Hel"}}]},
            {"choices": [{"delta": {"content": "lo sk-x"}, "finish_reason": None}]},
            {
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "t1",
                                    "function": {"name": "sea", "arguments": '{"q'},
                                },
                                {"index": 0, "function": {"name": "rch", "arguments": '":1}'}},
                            ]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 7,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 2},
                    "completion_tokens_details": None,
                },
            },
        ]
    )
    assert seen == 4 and reply is not None
    assert reply.content == "Hello [key]" and reply.attempt == 2
    assert reply.tool_calls == (("t1", "search", '{"q":1}'),)
    assert reply.finish_reason == "tool_calls" and (reply.id, reply.model) == ("c1", "m")
    assert reply.usage == Usage(input_tokens=7, cached_input_tokens=2, output_tokens=3)
    assert state.tokens == 4


@pytest.mark.asyncio
async def test_chunks_of_unexpected_shapes_are_ignored_not_raised() -> None:
    reply, _, seen = await _read(
        [
            "not an object",
            None,
            {"choices": "nope", "usage": {"prompt_tokens": True, "completion_tokens": "3"}},
            {"choices": [7, {"delta": ["x"]}]},
            {"choices": [{"delta": {"content": 5, "tool_calls": [3, {"function": "f"}]}}]},
            {"choices": [{"delta": {"content": "ok"}}], "model": 9},
        ]
    )
    assert seen == 6 and reply is not None
    assert reply.content == "ok" and reply.model is None
    assert reply.usage == Usage()  # counts that are not integers count as none


@pytest.mark.asyncio
async def test_a_stream_without_any_choice_is_no_reply() -> None:
    reply, _, seen = await _read([{"id": "x", "choices": []}, {"usage": {"prompt_tokens": 1}}])
    assert reply is None and seen == 2


def test_a_whole_reply_is_read_from_the_same_json() -> None:
    body = {
        "id": "c2",
        "model": "m",
        "choices": [
            {
                "message": {
                    "content": "sk-x said",
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        },
                        {"id": "t2", "type": "custom", "custom": {"name": "g", "input": ""}},
                        "junk",
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "completion_tokens_details": {}},
    }
    reply = reply_from_json(body, 3, lambda s: s.replace("sk-x", "[key]"))
    assert reply is not None and reply.attempt == 3
    assert reply.content == "[key] said" and reply.tool_calls == (("t1", "f", "{}"),)
    assert (reply.finish_reason, reply.id, reply.model) == ("tool_calls", "c2", "m")
    assert reply.usage == Usage(input_tokens=4, output_tokens=2)
    # a JSON body the server labelled as text reads the same
    assert reply_from_json(json.dumps(body), 3, lambda s: s.replace("sk-x", "[key]")) == reply


def test_a_whole_reply_without_a_choice_is_no_reply() -> None:
    for body in ({"choices": []}, {"choices": ["x"]}, {"id": "x"}, [1], "not json", None):
        assert reply_from_json(body, 1, str) is None
