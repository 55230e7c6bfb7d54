"""Cards, labels and policies: the validation rules of DESIGN §4.1 and §4.5."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.support import DEMO_CARD
from worldsim.domain.cards import card_hash, load_card, parse_utc, public_card_hash
from worldsim.domain.errors import CardError, PolicyError
from worldsim.domain.labels import load_label
from worldsim.domain.policy import known_policies, load_policy

BASE = {
    "id": "c1",
    "question": "Will it happen?",
    "as_of": "2027-01-01",
    "deadline": "2027-03-01",
    "endpoints": [
        {"id": "y", "title": "Yes", "polarity": "yes"},
        {"id": "n", "title": "No", "polarity": "no"},
    ],
}


def write(tmp_path: Path, data: object, name: str = "card.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_demo_card_loads_with_utc_dates() -> None:
    card = load_card(DEMO_CARD)
    assert card.as_of == datetime(2027, 1, 4, tzinfo=UTC)
    assert card.yes_endpoint is not None and card.yes_endpoint.id == "cleared"
    assert [ep.id for ep in card.scored_endpoints] == ["cleared", "not_cleared"]


def test_bare_date_is_utc_midnight_and_naive_datetime_is_refused() -> None:
    assert parse_utc("2027-02-03") == datetime(2027, 2, 3, tzinfo=UTC)
    assert parse_utc("2027-02-03T10:00:00+02:00") == datetime(2027, 2, 3, 8, tzinfo=UTC)
    with pytest.raises(ValueError, match="no timezone"):
        parse_utc("2027-02-03T10:00:00")


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"as_of": "2027-04-01"}, "deadline", "must be after as_of"),
        ({"as_of": "2027-01-01T00:00:00"}, "as_of", "no timezone"),
        ({"outcome": "yes"}, "(root)", "resolution field 'outcome'"),
        ({"resolution": {"x": 1}}, "(root)", "resolution field 'resolution'"),
        (
            {"endpoints": [*BASE["endpoints"], {"id": "m", "title": "Maybe", "polarity": "yes"}]},  # type: ignore[list-item]
            "endpoints",
            "exactly two scored endpoints, found 3",
        ),
        ({"question": None}, "question", "valid string"),
        ({"unexpected": 1}, "unexpected", "Extra inputs"),
    ],
)
def test_bad_cards_name_file_and_field(
    tmp_path: Path, change: dict[str, object], field: str, message: str
) -> None:
    path = write(tmp_path, {**BASE, **change})
    with pytest.raises(CardError) as info:
        load_card(path)
    err = info.value
    assert err.file == str(path)
    assert err.field == field
    assert message in str(err)
    assert "\n" not in str(err)


def test_missing_field_is_named(tmp_path: Path) -> None:
    data = {k: v for k, v in BASE.items() if k != "deadline"}
    with pytest.raises(CardError) as info:
        load_card(write(tmp_path, data))
    assert info.value.field == "deadline"
    assert "Field required" in str(info.value)


def test_a_misspelled_required_field_is_named_beside_the_missing_one(tmp_path: Path) -> None:
    data = {k: v for k, v in BASE.items() if k != "question"}
    path = write(tmp_path, {**data, "questoin": BASE["question"], "domian": "x"})
    with pytest.raises(CardError) as info:
        load_card(path)
    assert info.value.field == "question"
    assert str(info.value).endswith(
        "Field required ('questoin' is given, which is not a field: a misspelling?)"
    )
    # nothing alike given: the missing field alone
    path = write(tmp_path, {**data, "domian": "x"})
    with pytest.raises(CardError) as info:
        load_card(path)
    assert str(info.value).endswith("field 'question': Field required")


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "id: x\nquestion: [unclosed\nas_of: 2027-01-01\n")
    with pytest.raises(CardError, match="malformed YAML") as info:
        load_card(path)
    assert info.value.line is not None


def test_missing_file_is_a_card_error(tmp_path: Path) -> None:
    with pytest.raises(CardError, match="card not found"):
        load_card(tmp_path / "absent.yaml")


def test_endpoint_with_resolution_is_refused(tmp_path: Path) -> None:
    eps = [{"id": "y", "title": "Yes", "polarity": "yes", "resolved": True}, BASE["endpoints"][1]]  # type: ignore[index]
    with pytest.raises(CardError, match=r"endpoints\.0 carries resolution field 'resolved'"):
        load_card(write(tmp_path, {**BASE, "endpoints": eps}))


def test_multiple_choice_card_needs_rates_summing_to_one(tmp_path: Path) -> None:
    mc = {
        **BASE,
        "kind": "multiple_choice",
        "endpoints": [{"id": k, "title": k} for k in ("a", "b", "c")],
        "seeds": {"base_rates": {"a": 0.5, "b": 0.3, "c": 0.3}},
    }
    with pytest.raises(CardError, match="sum to 1"):
        load_card(write(tmp_path, mc))
    mc["seeds"] = {"base_rates": {"a": 0.5, "b": 0.3, "c": 0.2}}
    assert len(load_card(write(tmp_path, mc, "ok.yaml")).scored_endpoints) == 3


def test_seed_relations_must_name_known_agents(tmp_path: Path) -> None:
    data = {
        **BASE,
        "seeds": {
            "actors": [{"id": "a", "name": "A"}],
            "relations": [{"source": "a", "target": "ghost"}],
        },
    }
    with pytest.raises(CardError, match="unknown actor or cohort 'ghost'"):
        load_card(write(tmp_path, data))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("yes", "yes"), (1, "yes"), ("true", "yes"), (False, "no"), ("0", "no"), ("film_b", "film_b")],
)
def test_label_outcomes_normalise(tmp_path: Path, raw: object, expected: str) -> None:
    path = write(tmp_path, {"card_id": "c1", "outcome": raw}, "label.yaml")
    assert load_label(path).outcome == expected


def test_presets_load_and_match_the_design() -> None:
    assert {"no_branch", "branching", "adaptive"} <= set(known_policies())
    nb, br, ad = (load_policy(n) for n in ("no_branch", "branching", "adaptive"))
    assert (nb.max_active, nb.branch_threshold) == (1, 0.999)
    assert (br.max_depth, br.max_active, br.max_branches_per_tick) == (2, 4, 2)
    assert (br.branch_threshold, br.runway_ticks, br.candidate_endpoints_only) == (0.75, 2, True)
    assert ad.adaptive is not None


def test_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(PolicyError, match=r"unknown policy 'wild' \(known: .*branching"):
        load_policy("wild")


def test_policy_file_with_bad_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, {"name": "p", "max_active": 0}, "p.yaml")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.field == "max_active"


def test_project_local_policies_override_bundled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "policies").mkdir()
    write(
        tmp_path / "policies",
        {"name": "branching", "max_active": 9, "max_depth": 3},
        "branching.yaml",
    )
    monkeypatch.chdir(tmp_path)
    assert load_policy("branching").max_active == 9


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_card_number_must_be_finite(tmp_path: Path, value: str) -> None:
    text = DEMO_CARD.read_text(encoding="utf-8")
    path = tmp_path / "card.yaml"
    path.write_text(text.replace("pressure: 0.25}", f"pressure: {value}}}"), encoding="utf-8")
    with pytest.raises(CardError, match=r"seeds\.events\.0\.pressure.*finite number"):
        load_card(path)


def test_a_whole_number_variable_is_kept_within_what_a_float_holds(tmp_path: Path) -> None:
    """Up to 2⁵³ a whole number stays one; beyond a float's range the card is refused, naming
    the variable (the offline world and a model's reply carry variables as floats)."""
    seeds = {"variables": {"small": 2**53, "negative": -(2**53), "share": 0.5}}
    card = load_card(write(tmp_path, {**BASE, "seeds": seeds}))
    assert card.seeds is not None
    assert card.seeds.variables == {"small": 2**53, "negative": -(2**53), "share": 0.5}
    assert isinstance(card.seeds.variables["small"], int)
    huge = write(tmp_path, f"{yaml.safe_dump(BASE)}seeds:\n  variables:\n    big: {10**400}\n")
    with pytest.raises(CardError, match=r"seeds\.variables.*'big'.*beyond what a float holds"):
        load_card(huge)


def test_a_key_given_twice_is_refused_naming_the_line(tmp_path: Path) -> None:
    text = DEMO_CARD.read_text(encoding="utf-8")
    path = tmp_path / "card.yaml"
    path.write_text(text.replace("\nquestion:", "\nquestion: Will it?\nquestion:", 1))
    line = path.read_text().splitlines().index("question: Will it?") + 2
    with pytest.raises(CardError, match=rf"card\.yaml:{line}: malformed YAML: duplicate key"):
        load_card(path)


@pytest.mark.parametrize("question", [None, "Will Zürich's régulateur clear it — by 31 März?"])
def test_a_cards_hash_is_the_sha256_of_its_sorted_ascii_json(question: str | None) -> None:
    """The hash is defined over the standard library's sorted JSON with non-ASCII escaped; it is
    made faster where the card is all ASCII, and the same either way."""
    card = load_card(DEMO_CARD)
    if question is not None:
        card = card.model_copy(update={"question": question})
    blob = json.dumps(card.public_dict(), sort_keys=True, separators=(",", ":"))
    assert card_hash(card) == hashlib.sha256(blob.encode()).hexdigest()
    assert public_card_hash(card.public_dict()) == card_hash(card)
