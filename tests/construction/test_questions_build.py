"""The forward pipeline: the quality role's scores and flags and the temporal checks each give a
named rejection reason (a question whose provenance holds an article from after it opens is
refused); near-duplicates merge into the earliest without its later articles; markets become
cards; the shipped corpus builds cards offline end to end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.support import ROOT, invoke
from worldsim.build.calls import BuildLog
from worldsim.build.policy import QualityPolicy
from worldsim.build.questions import Article, Built, Market, build_questions, read_markets
from worldsim.domain.cards import load_card
from worldsim.domain.contracts import ModelRequest
from worldsim.domain.errors import CardError
from worldsim.domain.outputs import QuestionReviewOutput, QuestionsOutput
from worldsim.testing import ScriptedModel

CORPUS = ROOT / "scenarios" / "corpus"
ARTICLES = [
    Article("a1", datetime(2027, 1, 10, 8, tzinfo=UTC), "Harbour toll proposed", "harbour toll"),
    Article("a2", datetime(2027, 1, 20, 8, tzinfo=UTC), "Harbour toll vote set", "harbour toll"),
    Article("a3", datetime(2027, 3, 1, 8, tzinfo=UTC), "Harbour toll approved", "harbour toll"),
]
GOOD = {"clarity": 0.9, "measurability": 0.9, "answerability": 0.9}


def _proposal(question: str, opens: str = "2027-01-21", **changes: Any) -> dict[str, Any]:
    return {
        "question": question,
        "opens": opens,
        "deadline": "2027-04-15",
        "resolution_criteria": "yes if approved",
        "provenance": ["a2"],
        **changes,
    }


def _run(proposals: list[dict[str, Any]], reviews: dict[str, dict[str, Any]], tmp: Path) -> Built:
    def reply(request: ModelRequest) -> dict[str, Any]:
        if request.output_type is QuestionsOutput:
            return {"questions": proposals if request.site.index == 0 else []}
        assert request.output_type is QuestionReviewOutput
        question = request.view.variables["proposal"]["question"]
        return {
            **GOOD,
            "answer_in_question": False,
            "resolved_at_opens": False,
            **reviews.get(question, {}),
        }

    model = ScriptedModel(reply)
    log = BuildLog(tmp / "build.jsonl")
    return anyio.run(
        lambda: build_questions(
            ARTICLES,
            [],
            {"question_generator": model, "question_qa": model},
            QualityPolicy(),
            log,
            source_file="articles.jsonl",
        )
    )


def test_each_check_gives_its_reason(tmp_path: Path) -> None:
    proposals = [
        _proposal("Will the harbour authority approve the toll by 2027-04-15?"),
        _proposal("Will the board vote at some point?"),
        _proposal("Will the approved toll start by 2027-04-15?"),
        _proposal("Will the ferry operator cap fares by 2027-04-15?"),
        _proposal("Will commuters accept the toll by 2027-04-15?", provenance=["a3"]),
        _proposal("Will the pier be repaired by 2027-04-15?", deadline="2027-01-01"),
        _proposal("Will the council fund the pier by 2027-04-15?", opens="soon"),
        _proposal("Will the mayor back the toll by 2027-04-15?", provenance=["nonesuch"]),
        _proposal("Will the port fund the pier by 2027-04-15?", deadline="2027-04-15T00:00:00"),
    ]
    reviews = {
        "Will the board vote at some point?": {"clarity": 0.3, "measurability": 0.2},
        "Will the approved toll start by 2027-04-15?": {"answer_in_question": True},
        "Will the ferry operator cap fares by 2027-04-15?": {"resolved_at_opens": True},
    }
    built = _run(proposals, reviews, tmp_path)
    assert [c.question for c in built.cards] == [proposals[0]["question"]]
    reasons = {r["question"]: r["reasons"] for r in built.rejects}
    assert reasons[proposals[1]["question"]] == [
        "clarity 0.30 is below 0.60",
        "measurability 0.20 is below 0.60",
    ]
    assert reasons[proposals[2]["question"]] == ["the question gives its answer away"]
    assert reasons[proposals[3]["question"]] == [
        "temporal validity: already resolved when it opens"
    ]
    # an article from after the question opens in its provenance: refused
    assert reasons[proposals[4]["question"]] == [
        "temporal validity: provenance article 'a3' is dated 2027-03-01, after it opens "
        "(2027-01-21)"
    ]
    assert reasons[proposals[5]["question"]] == [
        "temporal validity: it resolves at or before it opens"
    ]
    assert reasons[proposals[6]["question"]] == ["opens: not an ISO date or datetime: 'soon'"]
    assert reasons[proposals[7]["question"]] == ["provenance names an unknown article 'nonesuch'"]
    assert reasons[proposals[8]["question"]] == [
        "deadline: datetime '2027-04-15T00:00:00' has no timezone; add 'Z' or an offset"
    ]
    card = built.cards[0]
    assert card.opens == card.as_of == datetime(2027, 1, 21, tzinfo=UTC)
    assert card.provenance is not None and card.provenance.articles == ("a2",)


def test_near_duplicates_merge_into_the_earliest_without_its_later_articles(
    tmp_path: Path,
) -> None:
    later = _proposal(
        "Will the harbour authority approve the new toll by 2027-04-15?",
        opens="2027-03-02",
        provenance=["a1", "a3"],
    )
    first = _proposal("Will the harbour authority approve the toll by 2027-04-15?")
    other_date = _proposal("Will the harbour authority approve the toll by 2027-05-30?")
    built = _run([later, first, other_date], {}, tmp_path)
    assert [c.question for c in built.cards] == [first["question"], other_date["question"]]
    assert built.merged == [{"question": later["question"], "into": first["question"]}]
    merged = built.cards[0]
    assert merged.provenance is not None
    assert merged.provenance.articles == ("a2", "a1")  # a3 came out after it opens


def test_markets_become_cards_and_a_bad_line_is_named(tmp_path: Path) -> None:
    markets = read_markets(CORPUS / "markets.jsonl")
    assert [m.proposal.kind for m in markets] == ["binary", "multiple_choice"]
    assert markets[0].prices[0] == ("2027-02-01", 0.45)
    bad = tmp_path / "markets.jsonl"
    bad.write_text(
        json.dumps(
            {"id": "m", "question": "q?", "open_date": "2027-01-01", "close_date": "2027-02-01"}
        )
        + "\n"
        + json.dumps(
            {
                "id": "m2",
                "question": "q?",
                "open_date": "2027-01-01",
                "close_date": "2027-02-01",
                "prices": [["2027-01-02", 1.5]],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(CardError) as error:
        read_markets(bad)
    assert error.value.line == 2 and error.value.field == "prices.0.1"  # the p of prices.0
    assert isinstance(markets[0], Market)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"outcome": ["A", "B", "C"]}, "outcome", "Extra inputs are not permitted"),
        ({"bogus_field": 1}, "bogus_field", "Extra inputs are not permitted"),
        ({"prices": [["2027-13-01", 0.4]]}, "prices", "prices.0: '2027-13-01' is not a date"),
        ({"outcomes": ["Only"]}, "outcomes", "at least 2 items"),
        ({"question": "  "}, "question", "should match pattern"),
        ({"open_date": "2027-01-01T00:00:00"}, "open_date", "has no timezone; add 'Z'"),
        ({"close_date": "x"}, "close_date", "not an ISO date or datetime: 'x'"),
    ],
)
def test_a_markets_line_is_read_strictly(
    tmp_path: Path, change: dict[str, Any], field: str, message: str
) -> None:
    """A misspelled or unknown field, an impossible price date and an opening or closing date
    that is not a date or has no time zone are refused, as the articles file refuses them,
    where they were read past."""
    line = {
        "id": "m",
        "question": "Will it?",
        "open_date": "2027-01-01",
        "close_date": "2027-03-01",
    }
    path = tmp_path / "markets.jsonl"
    path.write_text(json.dumps({**line, **change}) + "\n", encoding="utf-8")
    with pytest.raises(CardError) as error:
        read_markets(path)
    assert (error.value.line, error.value.field) == (1, field)
    assert message in error.value.message


def test_the_shipped_corpus_builds_cards_offline(tmp_path: Path) -> None:
    db = tmp_path / "corpus.sqlite"
    assert invoke("gateway", "ingest", CORPUS / "articles.jsonl", "--db", db).code == 0
    out = tmp_path / "cards"
    done = invoke(
        "build", "questions", "--db", db, "--markets", CORPUS / "markets.jsonl", "-o", out
    )
    assert done.code == 0, done.err
    cards = {p.stem: load_card(p) for p in out.glob("*.yaml")}
    assert "2027-02-02-larkport-harbour-authority-approve-new-ferry-toll" in cards
    assert "demo-market-norland-quota" in cards
    toll = cards["2027-02-02-larkport-harbour-authority-approve-new-ferry-toll"]
    assert toll.provenance is not None and "offline rules" in (toll.provenance.source or "")
    assert (out / "demo-market-larkport-toll.prices.csv").read_text().startswith("date,price\n")
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").open()]
    assert any("the question gives its answer away" in r["reasons"] for r in rejects)
    assert any(r["reasons"] == ["clarity 0.50 is below 0.60"] for r in rejects)
    log = [json.loads(line) for line in (out / "build.jsonl").open()]
    assert log[0]["type"] == "build_started" and log[0]["offline_rules"] is True
    assert {"merged", "kept", "rejected", "cluster", "llm_call"} <= {e["type"] for e in log}
    # the cards run: the evidence database is named from their folder
    for built in (toll.id, "demo-market-larkport-toll"):  # a market's card reads it too
        data = yaml.safe_load((out / f"{built}.yaml").read_text(encoding="utf-8"))
        assert data["evidence"] == {"database": "../corpus.sqlite"}
    ran = invoke("run", out / f"{toll.id}.yaml", "--out", tmp_path / "runs", "--ticks", "2")
    assert ran.code == 0, ran.err
    again = invoke("build", "questions", "--db", db, "-o", out)
    assert again.code == 2 and "--force" in again.err


def test_a_question_that_makes_no_valid_card_is_rejected_not_raised(tmp_path: Path) -> None:
    twins = _proposal(
        "Which option will the harbour authority choose by 2027-04-15?",
        kind="multiple_choice",
        outcomes=["Toll", "toll", "No toll"],
    )
    built = _run([twins], {}, tmp_path)
    assert built.cards == []
    (reject,) = built.rejects
    assert reject["reasons"][0].startswith("does not make a valid card: field 'endpoints'")
