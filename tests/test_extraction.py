"""Extraction rules (DESIGN §4.6): hand-worked values and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worldsim.domain.errors import ConfigError
from worldsim.world.extraction import EXTRACTION_RULES, Leaf, extract

LEAVES = [
    Leaf("t0", 0.42, "yes"),
    Leaf("t0.1", 0.18, "no"),
    Leaf("t0.2", 0.28, "unresolved", forced_p_yes=0.8),
    Leaf("t0.1.1", 0.12, "unresolved"),
]


def test_path_ledger_by_hand() -> None:
    e = extract(LEAVES, "path-ledger/1")
    # 0.42·1 + 0.18·0 + 0.28·0.8 + 0.12·0.5 = 0.42 + 0.224 + 0.06
    assert e.p_yes == pytest.approx(0.704, abs=1e-12)
    assert e.unresolved_mass == pytest.approx(0.40)
    assert e.max_mass == pytest.approx(0.42)
    # 1 / (0.42² + 0.18² + 0.28² + 0.12²) = 1 / (0.1764 + 0.0324 + 0.0784 + 0.0144) = 1 / 0.3016
    assert e.effective_paths == pytest.approx(1 / 0.3016)
    assert [leaf.timeline for leaf in e.leaves] == ["t0", "t0.1", "t0.1.1", "t0.2"]


def test_candidate_status_mass_by_hand() -> None:
    e = extract(LEAVES, "candidate-status-mass/1")
    # (M_yes + 0.5·M_unres) / total = (0.42 + 0.5·0.40) / 1
    assert e.p_yes == pytest.approx(0.62)
    assert extract([Leaf("t0", 1.0, "unresolved")], "candidate-status-mass/1").p_yes == 0.5


def test_multiple_choice_spreads_unresolved_mass() -> None:
    leaves = [
        Leaf("t0", 0.5, "a"),
        Leaf("t0.1", 0.5, "unresolved", forced_probs={"a": 0.2, "b": 0.3, "c": 0.5}),
    ]
    e = extract(leaves, "path-ledger/1", ["a", "b", "c"])
    assert e.p_yes is None and e.p_options == pytest.approx({"a": 0.6, "b": 0.15, "c": 0.25})
    flat = extract(leaves, "candidate-status-mass/1", ["a", "b", "c"])
    assert flat.p_options == pytest.approx({"a": 0.5 + 0.5 / 3, "b": 0.5 / 3, "c": 0.5 / 3})


def test_masses_stay_probabilities_when_normalised_weights_round_above_one() -> None:
    # 0.846 + 0.06 + 0.094 normalised sums to 1.0000000000000002 in floating point
    leaves = [
        Leaf("t0", 0.846, "unresolved"),
        Leaf("t0.1", 0.06, "unresolved"),
        Leaf("t0.2", 0.094, "unresolved"),
    ]
    e = extract(leaves, "path-ledger/1")
    assert e.unresolved_mass == 1.0
    yes = extract([Leaf(leaf.timeline, leaf.mass, "yes") for leaf in leaves], "path-ledger/1")
    assert yes.yes_mass == 1.0


def test_a_path_settled_at_a_value_counts_as_settled_not_unresolved() -> None:
    """An ``expected`` path (the question resolved at value q) is valued at q by both rules and
    splits its mass q : 1 − q between yes and no; only the open path stays unresolved."""
    leaves = [
        Leaf("t0", 0.6, "expected", forced_p_yes=0.3),
        Leaf("t0.1", 0.4, "unresolved", forced_p_yes=0.9),
    ]
    ledger = extract(leaves, "path-ledger/1")
    assert ledger.p_yes == pytest.approx(0.6 * 0.3 + 0.4 * 0.9)
    assert ledger.unresolved_mass == pytest.approx(0.4)
    assert (ledger.yes_mass, ledger.no_mass) == pytest.approx((0.18, 0.42))
    status = extract(leaves, "candidate-status-mass/1")
    assert status.p_yes == pytest.approx(0.18 + 0.5 * 0.4)
    options = extract(
        [Leaf("t0", 1.0, "expected", forced_probs={"a": 0.2, "b": 0.8})],
        "candidate-status-mass/1",
        ["a", "b"],
    )
    assert options.p_options == pytest.approx({"a": 0.2, "b": 0.8})
    assert options.unresolved_mass == 0.0


@pytest.mark.parametrize("rule", EXTRACTION_RULES)
def test_every_rule_a_run_may_name_has_a_value_and_an_options_rule(rule: str) -> None:
    binary = extract(LEAVES, rule)
    assert 0.0 <= binary.p_yes <= 1.0
    options = extract([Leaf("t0", 1.0, "expected", forced_probs={"a": 1.0})], rule, ["a", "b"])
    assert options.p_options is not None and set(options.p_options) == {"a", "b"}


def test_unknown_rule_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown extraction rule"):
        extract(LEAVES, "oracle/1")


_settle = st.sampled_from(["yes", "no", "expected", "unresolved"])


@given(
    st.lists(
        st.tuples(st.floats(1e-6, 1.0), _settle, st.none() | st.floats(0, 1)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["path-ledger/1", "candidate-status-mass/1"]),
)
def test_p_yes_is_a_probability_bounded_by_the_settled_mass(
    rows: list[tuple[float, str, float | None]], rule: str
) -> None:
    total = sum(m for m, _, _ in rows)
    leaves = [
        Leaf(f"t0.{i}" if i else "t0", m / total, s, 0.5 if f is None and s == "expected" else f)
        for i, (m, s, f) in enumerate(rows)
    ]
    e = extract(leaves, rule)
    assert e.p_yes is not None and 0.0 <= e.p_yes <= 1.0
    assert e.yes_mass - 1e-9 <= e.p_yes <= e.yes_mass + e.unresolved_mass + 1e-9
    open_mass = sum(leaf.mass for leaf in leaves if leaf.settlement == "unresolved")
    assert e.unresolved_mass == pytest.approx(open_mass, abs=1e-9)
    assert e.yes_mass + e.no_mass + e.unresolved_mass == pytest.approx(1.0)
    assert all(0.0 <= m <= 1.0 for m in (e.yes_mass, e.no_mass, e.unresolved_mass))
    assert 1.0 - 1e-9 <= e.effective_paths <= len(leaves) + 1e-9
