"""The hostile-input corpus: malformed and extreme cards, policies, run flags, labels, prediction
tables, evidence files and traces, each with the exit code and the names its one-line error
must carry.

Cases are data: a name, the input files (built lazily, most as edits of the demo card or of
one sound trace), the command line and what the error must name. ``len(CASES)`` is the count
README.md's "Reliability" section quotes.
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml

from tests.support import DEMO_CARD, ROOT
from worldsim.domain import bounds
from worldsim.domain.files import load_document

LABELS = ROOT / "scenarios" / "labels"
Build = Callable[[], bytes]


@dataclass(frozen=True)
class Case:
    """One hostile input: ``files`` are written into an empty folder, ``args`` run there."""

    id: str
    args: tuple[str, ...]
    files: Mapping[str, Build] = field(default_factory=dict)
    names: tuple[str, ...] = ()
    """Strings the one-line error must contain: the file, and the field or line where known."""
    code: int = 2


# --------------------------------------------------------------------------------------------
# builders


def demo() -> dict[str, Any]:
    """The demo card as plain data (dates as strings), a fresh copy each time."""
    return copy.deepcopy(_demo())


@functools.cache
def _demo() -> dict[str, Any]:
    data = load_document(DEMO_CARD)
    assert isinstance(data, dict)
    return data


def as_yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def card(edit: Callable[[dict[str, Any]], object], *, as_json: bool = False) -> Build:
    """The demo card with one edit, as YAML (or JSON: big cases read faster)."""

    def build() -> bytes:
        data = demo()
        edit(data)
        return json.dumps(data).encode() if as_json else as_yaml(data)

    return build


def put(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets the dotted ``path`` (list indexes as numbers) to ``value``."""

    def edit(data: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = data
        for part in head:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(last) if isinstance(node, list) else last] = value

    return edit


def text(content: str | bytes) -> Build:
    return lambda: content.encode() if isinstance(content, str) else content


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON (and YAML flow) value of lists nested ``depth`` deep."""
    return "[" * depth + leaf + "]" * depth


def jsonl(*records: Mapping[str, Any] | str) -> Build:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return text("\n".join(lines) + "\n")


def article(**changes: Any) -> dict[str, Any]:
    base = {"id": "d1", "published_at": "2026-01-01T12:00:00Z", "title": "t", "text": "body"}
    return {**base, **changes}


@functools.cache
def sound_trace() -> bytes:
    """The bytes of one short, complete offline run of the demo card."""
    from worldsim.domain.cards import load_card
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), ticks=3)
    with tempfile.TemporaryDirectory() as out:
        path = anyio.run(lambda: run_card(config, out, fsync=False)).trace
        return Path(path).read_bytes()


def trace(edit: Callable[[list[bytes]], list[bytes]]) -> Build:
    """The sound trace with its lines edited."""
    return lambda: b"\n".join(edit(sound_trace().split(b"\n")))


def _edit_seed(lines: list[bytes]) -> list[bytes]:
    return [lines[0].replace(b'"seed":0', b'"seed":1', 1), *lines[1:]]


def _replace_line(n: int, raw: bytes) -> Callable[[list[bytes]], list[bytes]]:
    return lambda lines: [*lines[:n], raw, *lines[n + 1 :]]


@functools.cache
def evidence_db() -> bytes:
    """An evidence database holding one article, as bytes."""
    from worldsim.domain.cards import EvidenceDoc
    from worldsim.gateway.store import open_store

    doc = EvidenceDoc.model_validate(article())

    async def build(path: Path) -> None:
        async with open_store(path, create=True) as store:
            await store.add([doc])

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "db.sqlite"
        anyio.run(build, path)
        return path.read_bytes()


# --------------------------------------------------------------------------------------------
# the corpus

RUN = ("run", "card.yaml", "--out", "out")
FORECAST = ("forecast", "card.yaml", "--model", "offline", "--out", "out")
ACTORS_40000 = [{"id": f"a{i}", "name": "A"} for i in range(40_000)]
DEEP = 5_000  # beyond Python's recursion limit (1,000)
SCORE = ("score", "--labels", str(LABELS), "--json", "report.json")


def _card_cases() -> list[Case]:
    cases: list[tuple[str, Build, tuple[str, ...]]] = [
        ("impact-51", card(put("seeds.hypotheses.0.impact", 51)), ("impact",)),
        ("impact-1e308", card(put("seeds.hypotheses.0.impact", 1e308)), ("impact",)),
        ("pressure-1e308", card(put("seeds.events.0.pressure", 1e308)), ("pressure",)),
        (
            "pressure-map-1e308",
            card(put("seeds.events.0.pressure", {"cleared": -1e308})),
            ("pressure",),
        ),
        ("cohort-size-10e400", card(put("seeds.cohorts.0.size", 10**400)), ("size",)),
        ("cohort-size-bool", card(put("seeds.cohorts.0.size", True)), ("size",)),
        ("stance-bool", card(put("seeds.actors.0.stance", True)), ("stance",)),
        ("stance-string", card(put("seeds.actors.0.stance", "0.5")), ("stance",)),
        ("stance-nan", card(put("seeds.actors.0.stance", float("nan"))), ("stance",)),
        ("hazard-inf", card(put("seeds.hazard", float("inf"))), ("hazard",)),
        ("probability-one", card(put("seeds.hypotheses.0.probability", 1.0)), ("probability",)),
        ("question-1mb", big(put("question", "x" * 1_000_000)), ("question",)),
        ("context-1mb", big(put("context", "x" * 1_000_000)), ("context",)),
        ("actor-name-long", card(put("seeds.actors.0.name", "n" * 10_000)), ("name",)),
        ("as-of-year-1", card(put("as_of", "0001-01-01")), ("as_of",)),
        ("deadline-year-9999", card(put("deadline", "9999-12-31")), ("deadline",)),
        (
            "event-date-overflow",
            card(put("seeds.events.0.date", "0001-01-01T00:00:00+01:00")),
            ("date",),
        ),
        (
            "evidence-date-overflow",
            card(put("evidence.0.published_at", "9999-12-31T23:59:59-01:00")),
            ("published_at",),
        ),
        ("naive-datetime", card(put("as_of", "2027-01-04T00:00:00")), ("as_of",)),
        ("as-of-after-deadline", card(put("as_of", "2027-04-01")), ("card.yaml",)),
        ("outcome-leaked", card(put("outcome", "yes")), ("outcome",)),
        ("card-id-path", card(put("id", "../escape")), ("id",)),
        ("unknown-field", card(put("seeds.actors.0.mood", "calm")), ("mood",)),
        (
            "trace-size-40000-actors",  # 4 timelines × 8 ticks × 40,002 agents: 2.6 GB estimated
            big(lambda d: d["seeds"].update(actors=ACTORS_40000, relations=[])),
            ("--max-trace-mb",),
        ),
        ("nested-70", card(put("seeds.variables.deep", json.loads(nested(70)))), ("seeds",)),
        ("nested-5000", text(f"id: x\nquestion: q\nfoo: {nested(DEEP)}\n"), ("nested",)),
        ("yaml-alias-cycle", text("id: x\nfoo: &a [*a]\n"), ("foo",)),
        ("duplicate-key", text("id: x\nid: y\n"), ("duplicate key",)),
        ("not-utf8", text(b"id: \xff\xfe\n"), ("cannot read card",)),
        ("empty", text(""), ("mapping",)),
        ("top-level-list", text("- 1\n- 2\n"), ("mapping",)),
        ("malformed-yaml", text("id: [x\n"), ("malformed YAML",)),
    ]
    return [
        Case(f"card/{name}", RUN, {"card.yaml": build}, ("card.yaml", *names))
        for name, build, names in cases
    ]


def big(edit: Callable[[dict[str, Any]], object]) -> Build:
    """A large edited card: JSON is valid YAML and reads a hundred times faster."""
    return card(edit, as_json=True)


def _json_card_cases() -> list[Case]:
    args = ("run", "card.json", "--out", "out")
    return [
        Case(
            "card/json-actors-over-the-limit",
            args,
            {
                "card.json": card(  # (the million actors made only when the file is)
                    lambda d: d["seeds"].update(
                        actors=[{"id": f"a{i}", "name": "A"} for i in range(bounds.MAX_ACTORS + 1)]
                    ),
                    as_json=True,
                )
            },
            ("card.json", "actors", f"at most {bounds.MAX_ACTORS:,} actors"),
        ),
        Case(
            "card/json-nested-5000",
            args,
            {"card.json": text('{"id": "x", "foo": ' + nested(DEEP) + "}")},
            ("card.json", "nested"),
        ),
        Case(
            "card/json-integer-5000-digits",
            args,
            {"card.json": text('{"id": ' + "1" * 5_000 + "}")},
            ("card.json", "malformed JSON"),
        ),
        Case(
            "card/json-nan",
            args,
            {"card.json": text(json.dumps({**demo(), "seeds": {"hazard": float("nan")}}))},
            ("card.json", "hazard"),
        ),
    ]


def _policy_cases() -> list[Case]:
    def policy(body: str) -> Mapping[str, Build]:
        return {"card.yaml": card(lambda _: None), "policy.yaml": text(f"name: p\n{body}\n")}

    args = (*RUN, "--policy", "policy.yaml")
    cases = [
        ("max-active-10e400", f"max_active: {10**400}", "max_active"),
        ("max-active-1e6", "max_active: 1000000", "max_active"),
        ("max-active-bool", "max_active: true", "max_active"),
        ("max-active-float", "max_active: 4.0", "max_active"),
        ("max-depth-65", "max_depth: 65", "max_depth"),
        ("threshold-nan", "branch_threshold: .nan", "branch_threshold"),
        ("threshold-bool", "branch_threshold: false", "branch_threshold"),
        ("ticks-zero", "ticks: 0", "ticks"),
        ("ticks-string", "ticks: '8'", "ticks"),
        ("unknown-field", "max_forks: 3", "max_forks"),
        ("nested-70", f"description: {nested(70)}", "description"),
        ("name-with-slash", "name: a/b", "name"),
    ]
    return [
        Case(f"policy/{name}", args, policy(body), ("policy.yaml", field_name))
        for name, body, field_name in cases
    ]


def _flag_cases() -> list[Case]:
    plain = {"card.yaml": card(lambda _: None)}
    cases = [
        ("method-label-path", ("--method-label", "../../x"), ("method",)),
        ("seed-2e63", ("--seed", str(2**63)), ("seed",)),
        ("seed-last-replicate", ("--seed", str(2**63 - 1), "--replicates", "2"), ("replicates",)),
        ("replicates-1e9", ("--replicates", "1000000000"), ("--replicates",)),
        ("ticks-zero", ("--ticks", "0"), ("--ticks",)),
        ("ticks-10001", ("--ticks", "10001"), ("--ticks",)),
        ("max-connections-1e6", ("--max-connections", "1000000"), ("--max-connections",)),
        ("max-cost-inf", ("--max-cost-usd", "inf"), ("--max-cost-usd",)),
        ("max-trace-mb-zero", ("--max-trace-mb", "0"), ("--max-trace-mb",)),
        ("extraction-unknown", ("--extraction", "mean/9"), ("extraction",)),
        ("role-unknown", ("--role", "nobody"), ("nobody",)),
        ("cache-unknown", ("--cache", "sometimes"), ("cache",)),
        ("out-is-a-file", ("--out", "card.yaml"), ("card.yaml", "out")),
    ]
    out = [Case(f"flag/{name}", (*RUN, *extra), plain, names) for name, extra, names in cases]
    config = {"card": "card.yaml", "seed": True}
    out += [
        Case(
            "flag/config-seed-bool",
            ("run", "--config", "run.yaml", "--out", "out"),
            {**plain, "run.yaml": text(as_yaml(config))},
            ("run.yaml", "seed"),
        ),
        Case(
            "flag/config-max-cost-inf",
            ("run", "--config", "run.yaml", "--out", "out"),
            {**plain, "run.yaml": text("card: card.yaml\nmodels: {max_cost_usd: .inf}\n")},
            ("run.yaml", "max_cost_usd"),
        ),
        Case(
            "flag/forecast-method-label",
            (*FORECAST, "--method-label", "a b"),
            plain,
            ("method",),
        ),
        Case(
            "flag/forecast-max-cost-inf",
            (*FORECAST, "--max-cost-usd", "inf"),
            plain,
            ("--max-cost-usd",),
        ),
        Case(
            "flag/forecast-as-of-year-1",
            FORECAST,
            {"card.yaml": card(put("as_of", "0001-01-01"))},
            ("card.yaml", "as_of"),
        ),
    ]
    return out


def _label_cases() -> list[Case]:
    table = {"table.csv": text("card_id,method,p_yes\nmerger-review,m,0.6\n")}
    label = "card_id: merger-review\noutcome: 'yes'\n"
    cases = [
        ("resolved-year-1", "labels/l.yaml", label + "resolved_at: 0001-01-01\n", "resolved_at"),
        ("nested-70", "labels/l.yaml", label + f"sources: {nested(70)}\n", "sources"),
        ("nested-5000", "labels/l.yaml", label + f"sources: {nested(DEEP)}\n", "nested"),
        ("not-utf8", "labels/l.yaml", b"card_id: \xff\n", "cannot read"),
        ("jsonl-nested", "labels/l.jsonl", '{"card_id": ' + nested(DEEP) + "}\n", "l.jsonl:1"),
        ("csv-missing-outcome", "labels/l.csv", "card_id\nmerger-review\n", "outcome"),
    ]
    return [
        Case(
            f"label/{name}",
            ("score", "table.csv", "--labels", path, "--json", "report.json"),
            {**table, path: text(body)},
            (path, names),
        )
        for name, path, body, names in cases
    ]


def _table_cases() -> list[Case]:
    def csv(body: str) -> Mapping[str, Build]:
        return {"t.csv": text("card_id,method,p_yes\n" + body)}

    cases: list[tuple[str, Mapping[str, Build], tuple[str, ...]]] = [
        ("csv-nan", csv("merger-review,m,nan\n"), ("t.csv:2", "p_yes")),
        ("csv-inf", csv("merger-review,m,inf\n"), ("t.csv:2", "p_yes")),
        ("csv-above-one", csv("merger-review,m,1.5\n"), ("t.csv:2", "p_yes")),
        ("csv-negative", csv("merger-review,m,-0.1\n"), ("t.csv:2", "p_yes")),
        ("csv-word", csv("merger-review,m,likely\n"), ("t.csv:2", "p_yes")),
        ("csv-ragged", csv("merger-review,m,0.5,extra\n"), ("t.csv:2",)),
        ("csv-huge-cell", csv("merger-review,m," + "9" * 200_000 + "\n"), ("t.csv",)),
        ("csv-not-utf8", {"t.csv": text(b"card_id,method,p_yes\n\xff,m,0.5\n")}, ("t.csv",)),
        ("csv-bom-not-first", csv("\ufeffmerger-review,m,x\n"), ("t.csv:2", "p_yes")),
        (
            "csv-options-sum",
            {"t.csv": text("card_id,method,p_a,p_b\nmerger-review,m,0.5,0.4\n")},
            ("t.csv:2", "sum"),
        ),
        (
            "jsonl-nan",
            {"t.jsonl": text('{"card_id": "merger-review", "method": "m", "p_yes": NaN}\n')},
            ("t.jsonl:1", "p_yes"),
        ),
        (
            "jsonl-bool",
            {"t.jsonl": jsonl({"card_id": "merger-review", "method": "m", "p_yes": True})},
            ("t.jsonl:1", "p_yes"),
        ),
        (
            "jsonl-as-of-overflow",
            {
                "t.jsonl": jsonl(
                    {
                        "card_id": "merger-review",
                        "method": "m",
                        "p_yes": 0.5,
                        "as_of": "9999-12-31T23:59:59-01:00",
                    }
                )
            },
            ("t.jsonl:1", "as_of"),
        ),
        (
            "jsonl-nested",
            {"t.jsonl": text('{"card_id": "merger-review", "p": ' + nested(DEEP) + "}\n")},
            ("t.jsonl:1",),
        ),
        ("jsonl-list-line", {"t.jsonl": text("[1, 2]\n")}, ("t.jsonl:1",)),
    ]
    return [
        Case(f"table/{name}", ("score", next(iter(files)), *SCORE[1:]), files, names)
        for name, files, names in cases
    ]


def _evidence_cases() -> list[Case]:
    ingest = ("gateway", "ingest", "a.jsonl", "--db", "db.sqlite")
    cases: list[tuple[str, Build, tuple[str, ...]]] = [
        (
            "year-1-plus-offset",
            jsonl(article(published_at="0001-01-01T00:00:00+01:00")),
            ("published_at",),
        ),
        (
            "year-9999-minus-offset",
            jsonl(article(published_at="9999-12-31T23:59:59-01:00")),
            ("published_at",),
        ),
        ("no-timezone", jsonl(article(published_at="2026-01-01T12:00:00")), ("published_at",)),
        (
            "stance-nan",
            text(
                '{"id": "d", "published_at": "2026-01-01T00:00:00Z", "title": "t", "stance": NaN}\n'
            ),
            ("stance",),
        ),
        ("stance-bool", jsonl(article(stance=True)), ("stance",)),
        ("title-2mb", jsonl(article(title="t" * 2_000_000)), ("title",)),
        ("nested", text('{"id": ' + nested(DEEP) + "}\n"), ("a.jsonl:1",)),
        ("not-an-object", text("[1]\n"), ("a.jsonl:1",)),
        ("not-utf8", text(b'{"id": "\xff"}\n'), ("a.jsonl",)),
        (
            "second-line-bad",
            jsonl(article(), article(id="d2", published_at="0001-01-01")),
            ("a.jsonl:2", "published_at"),
        ),
    ]
    out = [
        Case(f"evidence/{name}", ingest, {"a.jsonl": build}, ("a.jsonl", *names))
        for name, build, names in cases
    ]
    search = ("gateway", "search", "merger", "--db", "db.sqlite", "--before")
    for name, before in (
        ("search-year-1-plus-offset", "0001-01-01T00:00:00+05:00"),
        ("search-year-9999-minus-offset", "9999-12-31T23:59:59-05:00"),
        ("search-year-1", "0001-01-01"),
        ("search-naive", "2026-01-01T00:00:00"),
    ):
        out.append(
            Case(f"evidence/{name}", (*search, before), {"db.sqlite": evidence_db}, ("--before",))
        )
    return out


def _trace_cases() -> list[Case]:
    damaged: list[tuple[str, Build, str]] = [
        ("edited-byte", trace(_edit_seed), "t.jsonl:2"),
        ("not-utf8-line", trace(_replace_line(5, b"\xff\xfe\x00bad")), "t.jsonl:6"),
        (
            "huge-line",
            trace(_replace_line(5, b'{"v":2,"x":"' + b"a" * 5_000_000 + b'"}')),
            "t.jsonl:6",
        ),
        (
            "nested-line",
            trace(_replace_line(5, b'{"v":2,"data":' + nested(DEEP).encode() + b"}")),
            "t.jsonl:6",
        ),
        ("wrong-types", trace(_replace_line(0, b'{"v":"one","seq":"zero","type":5}')), "t.jsonl:1"),
        ("list-line", trace(_replace_line(0, b"[1,2,3]")), "t.jsonl:1"),
        ("empty", text(b""), "t.jsonl"),
    ]
    cases: list[Case] = []
    for name, build, where in damaged:
        files = {"t.jsonl": build}
        # every reader refuses what verify refuses, with its exit code (1) and its line; a
        # file whose first line does not open as a trace's ({"v") is read by score as a
        # prediction table
        tabled = name == "list-line"
        for command, args, code in (
            ("verify", (), 1),
            ("score", SCORE[1:], 2 if tabled else 1),
            ("replay", (), 1),
        ):
            cases.append(
                Case(f"trace/{command}-{name}", (command, "t.jsonl", *args), files, (where,), code)
            )
        cases.append(
            Case(f"trace/resume-{name}", ("run", "--resume", "t.jsonl"), files, (where,), 1)
        )
    return cases


def _output_cases() -> list[Case]:
    """Inputs named by flags that write: question lists, output folders that are files, price
    files on the offline route, a card id that names a folder."""
    questions = "id,question,as_of,deadline\n"
    plain = {"card.yaml": card(lambda _: None)}
    study = {
        "name": "s",
        "cards": ["card.yaml"],
        "methods": [{"label": "m", "run": {"policy": "no_branch", "ticks": 2}}],
    }
    prices = {
        "list": ("- 1\n- 2\n", ("p.yaml", "mapping")),
        "nan": (
            "models:\n  gpt-4o-mini: {input: .nan, output: 1}\n",
            ("models.gpt-4o-mini.input",),
        ),
        "inf": (
            "models:\n  gpt-4o-mini: {input: 1, output: .inf}\n",
            ("models.gpt-4o-mini.output",),
        ),
        "shape": ("models:\n  - gpt-4o-mini\n", ("p.yaml", "models")),
    }
    cases = [
        Case(
            "cards/import-csv-cell-300k",
            ("cards", "import", "q.csv", "-o", "out"),
            {"q.csv": text(questions + "q1," + "x" * 300_000 + ",2026-01-01,2026-06-01\n")},
            ("q.csv:2", "question", "131,072"),
        ),
        Case(
            "cards/import-out-is-a-file",
            ("cards", "import", "q.csv", "-o", "out"),
            {"q.csv": text(questions + "q1,Will it?,2026-01-01,2026-06-01\n"), "out": text("x")},
            ("out", "--out"),
        ),
        Case(
            "batch/out-is-a-file",
            ("batch", "study.yaml", "--out", "out"),
            {**plain, "study.yaml": text(as_yaml(study)), "out": text("x")},
            ("out", "--out"),
        ),
        Case(
            "batch/card-id-dotdot",
            ("batch", "study.yaml", "--out", "out"),
            {"card.yaml": card(put("id", "..")), "study.yaml": text(as_yaml(study))},
            ("study.yaml", "cards.0", "id"),
        ),
        Case("card/id-dot", RUN, {"card.yaml": card(put("id", "."))}, ("card.yaml", "id")),
        Case("card/id-dotdot", RUN, {"card.yaml": card(put("id", ".."))}, ("card.yaml", "id")),
    ]
    cases += [
        Case(
            f"flag/prices-{name}",
            (*RUN, "--prices", "p.yaml"),
            {**plain, "p.yaml": text(body)},
            ("p.yaml", *names),
        )
        for name, (body, names) in prices.items()
    ]
    return cases


def _registration_cases() -> list[Case]:
    """A pre-registration naming methods its predictions do not hold, refused at lock time."""
    table = text("card_id,method,p_yes\nmerger-review,branching,0.6\nmerger-review,no_branch,0.4\n")
    lock = ("prereg", "lock", "prereg.yaml", "--predictions", "t.csv", "-o", "lock.json")
    prereg = "methods: [branching, direct, no_branch]\nbaseline: branching\n"
    return [
        Case(
            "prereg/method-not-held",
            lock,
            {"t.csv": table, "prereg.yaml": text(prereg + "comparisons: ['branching:direct']\n")},
            ("prereg.yaml", "field 'methods'", "'direct'", "branching, no_branch"),
        ),
        Case(
            "prereg/baseline-not-held",
            lock,
            {
                "t.csv": table,
                "prereg.yaml": text(
                    "methods: [branching]\nbaseline: direct\ncomparisons: ['direct:branching']\n"
                ),
            },
            ("prereg.yaml", "field 'baseline'", "'direct'"),
        ),
    ]


CASES: tuple[Case, ...] = (
    *_card_cases(),
    *_json_card_cases(),
    *_policy_cases(),
    *_flag_cases(),
    *_label_cases(),
    *_table_cases(),
    *_evidence_cases(),
    *_trace_cases(),
    *_output_cases(),
    *_registration_cases(),
)
"""Every hostile input of the corpus."""

SUBPROCESS_CASES = (
    "card/impact-51",
    "card/nested-5000",
    "policy/max-active-bool",
    "evidence/year-1-plus-offset",
    "trace/verify-edited-byte",
)
"""Cases also run through the installed entry point, to prove it behaves the same."""
