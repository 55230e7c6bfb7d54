"""The canonical-form check of ``verify`` takes msgspec's fast path only where it is exact."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, get_args

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from worldsim.domain.jsonbytes import (
    canonical_bytes,
    compact_bytes,
    floats_in,
    json_row,
    raw_json,
)
from worldsim.trace.reader import in_writers_form
from worldsim.trace.records import ReviewData
from worldsim.trace.writer import record_line
from worldsim.world.moves import ProposalRef, Review
from worldsim.world.state import EvidenceIn, LedgerUpdate, SetVariable, ShiftPressure

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)


def _canonical(obj: Any) -> bytes:
    """The writer's bytes for ``obj``: compact JSON, non-ASCII as is."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(obj=st.dictionaries(st.text(max_size=8), values, max_size=6))
def test_the_writers_bytes_pass_and_any_other_spelling_fails(obj: dict[str, Any]) -> None:
    written = _canonical(obj)
    assert in_writers_form(written)
    for other in (
        msgspec.json.encode(obj),
        json.dumps(obj, ensure_ascii=False).encode(),  # with spaces
        json.dumps(obj, separators=(",", ":")).encode(),  # non-ASCII escaped
    ):
        assert in_writers_form(other) == (other == written)


def test_floats_the_two_encoders_spell_differently() -> None:
    for value in (1e-05, 1e16, 1.5e-07, -2.5e300, 0.0001, 123.0):
        assert in_writers_form(_canonical({"x": value}))
        spelled = msgspec.json.encode({"x": value})
        assert in_writers_form(spelled) == (spelled == _canonical({"x": value}))
    assert not in_writers_form(b'{"x":0.00001}')
    assert not in_writers_form(b'{"x":1e16}')
    assert not in_writers_form(b'{"x":1.50}')
    # the writer refuses NaN and the infinities: no line holding one is in its form
    assert not in_writers_form(b'{"x":NaN}') and not in_writers_form(b'{"x":nan}')
    assert not in_writers_form(b'{"x":[Infinity]}')


any_float = st.floats() | st.sampled_from([1e-05, 1e16, 1.5e-07, 5e-324, -0.0, 9e-05, 1e300])
keys = st.text(max_size=8) | st.integers(-(10**20), 10**20) | any_float | st.booleans()
written_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | any_float | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=20,
)


headers = st.dictionaries(
    st.text(max_size=8),
    st.none() | st.integers(-(10**20), 10**20) | st.text(max_size=70),
    min_size=1,
    max_size=8,
).filter(lambda header: "data" not in header)


@settings(max_examples=600, deadline=None)
@given(header=headers, data=written_values)
@example(header={"": None}, data={math.inf: []})  # msgspec writes the key as "inf"
@example(header={"": None}, data={-math.inf: 1, "x": 2})
@example(header={"": None}, data={math.nan: 1})
@example(header={"": None}, data={"inf": 1, "nan": 2})  # string keys: the same bytes
@example(header={"": None}, data={"run": "4fc9b469fae54e86", "x": 1e16})  # an e inside an id
@example(header={"": None}, data={"run": "9e12722562374761", "k": [1, 2.5e-7]})
@example(header={"": None}, data={1e16: "1e16", "1e16": 1.5e-07})  # a float key, a string key
@example(header={"": None}, data={-1e16: 1, "s": "x:1e5", "h": "abc1.5e-7"})
@example(header={"": None}, data=1e16)
@example(header={"": None}, data={"x": math.nan, "y": None})  # both written null by msgspec
@example(header={"": None}, data=[None, -math.inf])
@example(header={"": None}, data={"ps": [{"d": 1e-05, "s": "x"}, {"d": 0.5, "k": None}]})  # parts
@example(header={"": None}, data={"ps": [{"d": 0.5}, {"d": math.nan}]})  # a NaN deep in a part
def test_the_writer_writes_the_standard_librarys_bytes(header: dict[str, Any], data: Any) -> None:
    """``record_line`` takes msgspec's path only where its bytes are the standard
    library's, and refuses NaN and infinities as the standard library does."""
    obj = {**header, "data": data}
    try:
        expected = json.dumps(
            obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except ValueError:  # NaN or an infinity somewhere, or a lone surrogate
        with pytest.raises(ValueError):
            record_line(header, data)
        return
    assert record_line(header, data) == expected + b"\n"


@settings(max_examples=600, deadline=None)
@given(value=written_values)
@example(value={"run": "9e12722562374761", "events": [{"mass": 1e16, "id": "t0/1e5"}]})
@example(value=["12e4ab", {"x": -2.5e300}, "0e0"])
@example(value={"x": math.nan, "y": None})
@example(value=[None, math.inf])
@example(value={"b": [1e16, {"z": 1, "a": 9e-05}], "a": None, "inf": 2})  # written part by part
@example(value={"b": [{"z": math.nan}], "a": 1})
def test_canonical_bytes_is_the_standard_librarys_sorted_bytes(value: Any) -> None:
    """Every digest is taken over these bytes: msgspec's only where they are the same (NaN is
    written as the standard library writes it)."""
    try:
        want = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        want_bytes = want.encode()
    except (TypeError, ValueError) as refused:  # keys that do not sort, a lone surrogate
        with pytest.raises(type(refused)):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == want_bytes


lookalikes = st.from_regex(r"[0-9a-f.:,\[\"-]{0,6}[0-9]e[-+0-9][0-9a-f.:-]{0,6}", fullmatch=True)
exponent_heavy = st.recursive(
    lookalikes | any_float | st.integers(-(10**25), 10**25),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(lookalikes | any_float, inner),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(data=exponent_heavy)
def test_exponent_lookalikes_in_strings_and_keys_are_told_from_floats(data: Any) -> None:
    """Strings and keys that read like a float in exponent form (ids, digests, a float key)
    beside floats that are written in it: the bytes are still the standard library's."""
    try:
        expected = json.dumps(
            {"v": 1, "data": data}, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except ValueError:  # NaN or an infinity somewhere
        with pytest.raises(ValueError):
            record_line({"v": 1}, data)
        return
    assert record_line({"v": 1}, data) == expected + b"\n"
    if _sortable(data):  # the sorted form takes string keys only, as the standard library
        sorted_bytes = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert canonical_bytes(data) == sorted_bytes.encode()


def _assert_written_as_json(data: Any, floats: list[float] | None = None) -> None:
    """A record of ``data`` (its ``floats`` given, or not) is the standard library's bytes, or
    is refused as the standard library refuses it."""
    try:
        expected = json.dumps(
            {"v": 1, "data": data}, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except ValueError:
        with pytest.raises(ValueError):
            record_line({"v": 1}, data, floats)
        return
    assert record_line({"v": 1}, data, floats) == expected + b"\n"


def _sortable(value: Any) -> bool:
    """Whether the standard library can sort every key of ``value`` (string keys only)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) for k in value) and all(map(_sortable, value.values()))
    if isinstance(value, list | tuple):
        return all(map(_sortable, value))
    return True


@settings(max_examples=150, deadline=None)
@given(
    base=written_values,
    odd=st.lists(st.tuples(st.integers(0, 10_000), any_float | written_values), max_size=4),
    copies=st.integers(300, 900),
)
@example(base=None, odd=[(7, 1e-05)], copies=400)  # one proposal's float among many
@example(base={1: 2}, odd=[(0, math.nan), (399, 1e16)], copies=400)
def test_large_values_with_a_few_odd_items_are_the_standard_librarys_bytes(
    base: Any, odd: list[tuple[int, Any]], copies: int
) -> None:
    """A large record (a tick's proposals) a few of whose items hold what msgspec writes
    otherwise, given without its floats: the bytes, and the refusals, are still the standard
    library's, compact and sorted."""
    items: list[Any] = [{"i": i, "v": 0.5, "s": "p" * 20, "b": base} for i in range(copies)]
    for at, value in odd:
        items[at % copies]["v"] = value
    data = {"z": [1e16, "x"], "proposals": items}  # keys out of their sorted order
    _assert_written_as_json(data)
    try:
        want = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        want_bytes = want.encode()
    except (TypeError, ValueError) as refused:
        with pytest.raises(type(refused)):
            canonical_bytes(data)
        return
    assert canonical_bytes(data) == want_bytes


@settings(max_examples=600, deadline=None)
@given(data=written_values)
@example(data={"d": [1e-05, 0.5], "k": {1e16: 1}})
@example(data={"x": 9.999999999999999e-05, "y": 0.0001, "z": 9999999999999998.0, "n": -0.0})
@example(data=[math.nan, "x"])
@example(data=[1e-05, 1e-05, -1e-05, 2e-05, 1e300])  # each spelling as often as its float
@example(data=[1e-05, "0.00001", 10.00001])  # a string, a longer number hold the spelling
@example(data=[3e-05, 3e-05, 1e-300])
@example(data={"a": [3.5e-07, {"b": -3.5e-07}], "c": 1.5e16})
@example(data={1e-05: 1e-05})  # the key is written quoted
def test_a_value_given_with_its_floats_is_the_standard_librarys_bytes(data: Any) -> None:
    """A record's maker that lists every float its data holds (``floats_in`` finds them, keys
    included, each as often as it occurs) gets the standard library's bytes, compact and
    sorted, without the bytes being looked at; a float msgspec writes otherwise is respelled
    where that is certain, else the value goes down the looked-at path. A miscounted list
    (each float twice; one occurrence of a repeated float left out) still gets the standard
    library's bytes."""
    floats = list(floats_in(data))
    repeated = [i for i, x in enumerate(floats) if floats.count(x) > 1][:1]
    for listed in (
        floats,
        [*floats, *floats],
        [x for i, x in enumerate(floats) if i not in repeated],
    ):
        _assert_written_as_json(data, listed)
    if _sortable(data):
        sorted_bytes = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert canonical_bytes(data, floats) == sorted_bytes.encode()


def _float_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` and of the models inside it whose type admits a float."""
    found: list[str] = []

    def walk(kind: Any, where: str) -> None:
        if kind is float:
            found.append(where)
        elif isinstance(kind, type) and issubclass(kind, BaseModel):
            for name, field in kind.model_fields.items():
                walk(field.annotation, f"{where}.{name}")
        for arg in get_args(kind):
            walk(arg, where)

    walk(model, model.__name__)
    return found


def test_the_parts_of_a_review_taken_as_float_free_hold_no_float() -> None:
    """A review's record lists the floats of its small parts only: its accepted and rejected
    proposals and its ledger updates (the bulk of a tick's review) admit none."""
    fields = Review.model_fields
    for part in ("accepted", "rejected", "ledger"):
        assert _float_fields(fields[part].annotation) == [], part  # type: ignore[arg-type]
    assert _float_fields(Review)  # the walk finds the floats there are


reviews = st.builds(
    Review,
    accepted=st.lists(st.builds(ProposalRef, agent=st.text(max_size=3), index=st.integers(0, 3))),
    ledger=st.lists(
        st.builds(
            LedgerUpdate,
            endpoint=st.just("yes"),
            evidence=st.builds(EvidenceIn, kind=st.just("supports"), ref=st.just("t0/1/a/0")),
        ),
        max_size=3,
    ).map(tuple),
    deltas=st.lists(
        st.builds(ShiftPressure, endpoint=st.just("yes"), by=st.floats(-50, 50))
        | st.builds(SetVariable, name=st.just("v"), value=any_float.filter(math.isfinite)),
        max_size=3,
    ).map(tuple),
    forced_p_yes=st.none() | st.floats(0.0, 1e-3),
    forced_probs=st.none() | st.dictionaries(st.text(max_size=3), st.floats(0.0, 1.0)),
)


@settings(max_examples=200, deadline=None)
@given(review=reviews)
def test_a_review_record_lists_every_float_it_holds(review: Review) -> None:
    made = ReviewData.payload(review)
    assert Counter(made.floats) == Counter(floats_in(made.data))
    _assert_written_as_json(made.data, made.floats)


_Row = json_row("Row", ("agent", "index"))
_Sparse = json_row("Sparse", ("id", "note"), optional={"note": None})


@settings(max_examples=150, deadline=None)
@given(
    agents=st.lists(st.text(max_size=6), max_size=4),
    tiny=st.floats(allow_nan=False, allow_infinity=False),
    notes=st.lists(st.none() | st.text(max_size=4), max_size=3),
)
@example(agents=["a"], tiny=6.86e-16, notes=[None])  # a float msgspec spells otherwise
def test_rows_and_raw_json_beside_any_float_are_the_standard_librarys_bytes(
    agents: list[str], tiny: float, notes: list[str | None]
) -> None:
    """A record holding rows (`json_row`) and JSON made already (`raw_json`) next to a float
    the fast path cannot respell is written by the standard library, rows and all, as the
    plain value they stand for (it used to fail: json.dumps knew no row)."""
    rows = [_Row(a, i) for i, a in enumerate(agents)]
    sparse = [_Sparse(str(i), n) for i, n in enumerate(notes)]
    raw = raw_json(json.dumps({"p": tiny}).encode())
    data = {"accepted": rows, "sparse": sparse, "raw": raw, "p": tiny, "q": [tiny, 1e-300]}
    plain = {
        "accepted": [{"agent": a, "index": i} for i, a in enumerate(agents)],
        "sparse": [
            {"id": str(i), **({"note": n} if n is not None else {})} for i, n in enumerate(notes)
        ],
        "raw": {"p": tiny},
        "p": tiny,
        "q": [tiny, 1e-300],
    }
    want = json.dumps(plain, separators=(",", ":"), ensure_ascii=False).encode()
    for floats in (None, [tiny, tiny, 1e-300]):
        assert compact_bytes(data, floats) == want
