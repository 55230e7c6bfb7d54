"""Prices and the leakage guard (the budget has its own file, test_budget.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from worldsim.domain.errors import ConfigError, LeakageError, ModelError
from worldsim.models import LeakageGuard, LeakageGuardModel, Price, PriceTable, Usage
from worldsim.models.leakage import fingerprint
from worldsim.scoring.audit import record_strings
from worldsim.testing import ScriptedModel


def test_cost_charges_cached_input_at_the_cached_price() -> None:
    price = Price(input=2.0, cached_input=0.5, output=8.0)
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=250_000)
    assert price.cost(usage) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.25 * 8.0)


def test_price_lookup_prefers_routes_strips_dates_and_leaves_unknown_unpriced(
    tmp_path: Path,
) -> None:
    user = tmp_path / "prices.yaml"
    user.write_text(
        "models:\n  gpt-4o-mini: {input: 1.0, output: 2.0}\n"
        "  openrouter/meta-llama/llama-3.1-8b: {input: 0.02, output: 0.05}\n"
    )
    table = PriceTable.load(user)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert table.cost(["gpt-4o-mini-2024-07-18"], usage) == pytest.approx(3.0)
    assert table.cost(["openrouter/meta-llama/llama-3.1-8b", "x"], usage) == pytest.approx(0.07)
    assert table.cost(["gpt-4o"], usage) == pytest.approx(12.5)
    assert table.cost(["some-local-model"], usage) is None


def test_bad_price_file_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "prices.yaml"
    bad.write_text("models:\n  m: {input: -1, output: 2}\n")
    with pytest.raises(ConfigError) as caught:
        PriceTable.load(bad)
    assert caught.value.field == "models.m.input" and caught.value.file == str(bad)


@pytest.mark.asyncio
async def test_leakage_findings_hold_hashes_not_strings(tmp_path: Path, make_request: Any) -> None:
    forbidden = tmp_path / "forbidden.txt"
    forbidden.write_text("# masked entities\nAcme Holdings\nBlocked in March\n\n")
    guard = LeakageGuard.from_file(forbidden)
    reply = {"p_yes": 0.1, "stance": "oppose", "rationale": "acme holdings was BLOCKED IN MARCH"}
    model = LeakageGuardModel(ScriptedModel([reply]), guard)
    await model.request(make_request("What will ACME HOLDINGS do? Acme Holdings again."))

    found = {(f.where, f.sha256): f.count for f in guard.findings}
    assert found == {
        ("prompt", fingerprint("acme holdings")): 2,
        ("reply", fingerprint("acme holdings")): 1,
        ("reply", fingerprint("blocked in march")): 1,
    }
    dumped = str([f.model_dump() for f in guard.findings]).casefold()
    assert "acme" not in dumped and "march" not in dumped


@pytest.mark.asyncio
async def test_leakage_fail_mode_stops_the_prompt_before_it_is_sent(make_request: Any) -> None:
    guard = LeakageGuard.from_strings(["Acme Holdings"], mode="fail")
    inner = ScriptedModel([{"p_yes": 0.1, "stance": "oppose", "rationale": "x"}])
    with pytest.raises(LeakageError) as caught:
        await LeakageGuardModel(inner, guard).request(make_request("about acme holdings"))
    assert inner.requests == []
    assert "acme" not in str(caught.value).casefold()
    assert fingerprint("acme holdings")[:16] in str(caught.value)


@pytest.mark.asyncio
async def test_leakage_in_a_failed_calls_reply_is_found(make_request: Any) -> None:
    guard = LeakageGuard.from_strings(["Acme Holdings"])
    inner = ScriptedModel(['{"p_yes": 3, "rationale": "Acme Holdings"}'])
    with pytest.raises(ModelError):
        await LeakageGuardModel(inner, guard).request(make_request())
    assert [(f.where, f.count) for f in guard.findings] == [("reply", 1)]


_TEXT = st.text(alphabet=st.sampled_from("aAbB\x00\x01ß s"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    forbidden=st.lists(st.text(alphabet=st.sampled_from("aAbB\x00ßs "), max_size=3), max_size=4),
    texts=st.lists(_TEXT, max_size=6),
)
def test_scanning_strings_together_counts_what_each_holds_alone(
    forbidden: list[str], texts: list[str]
) -> None:
    guard = LeakageGuard.from_strings(forbidden)
    alone: Counter[str] = Counter()
    for text in texts:
        alone.update(guard.scan(text))
    assert dict(guard.scan_each(texts)) == dict(alone)


# ``ſ`` and the Kelvin sign casefold to ASCII letters, ``ß`` to two; quotes, backslashes and
# control characters are escaped in JSON, non-ASCII characters too when ``ensure_ascii``
_JSON_TEXT = st.text(alphabet=st.sampled_from('aAbBß sſ\u212ak"\\\n\x01é'), max_size=10)
_FORBIDDEN_CHARS = st.sampled_from('aAbBßsSk"\\\n é')
_JSON_VALUE = st.recursive(
    st.none() | st.integers(-5, 5) | st.floats(allow_nan=False) | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_JSON_TEXT, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@example(forbidden=["é"], value=["café"], ascii_only=True)  # written as caf\u00e9
@example(forbidden=['a"b'], value={"k": 'a"b'}, ascii_only=False)  # written as a\"b
@example(forbidden=["a\nb"], value="xa\nb", ascii_only=False)  # written as a\nb
@example(forbidden=["k"], value="\u212a", ascii_only=False)  # the Kelvin sign folds to k
@given(
    forbidden=st.lists(st.text(alphabet=_FORBIDDEN_CHARS, max_size=3), max_size=3),
    value=_JSON_VALUE,
    ascii_only=st.booleans(),
)
def test_a_line_said_to_hold_no_forbidden_string_holds_none(
    forbidden: list[str], value: Any, ascii_only: bool
) -> None:
    """The quick test before a trace line's strings are scanned never skips a line whose
    strings hold a forbidden string, whatever the escapes and case foldings (``ſ``, the
    Kelvin sign and ``ß`` fold to ASCII), in the writer's form or with every non-ASCII
    character escaped."""
    guard = LeakageGuard.from_strings(forbidden)
    raw = json.dumps({"data": value}, separators=(",", ":"), ensure_ascii=ascii_only).encode()
    found = guard.scan_each(record_strings(json.loads(raw)))
    if found:
        assert guard.may_occur_in(raw)
