"""The viewer's data and page, without a browser: escaping, refusal of damaged traces, the
content of the data against `worldsim replay`, comparisons."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import ROOT
from tests.view.conftest import HOSTILE
from worldsim.domain.errors import ConfigError
from worldsim.view.build import build_page, default_output, trace_page, write_view
from worldsim.view.compare import compare_data, first_divergence
from worldsim.view.extract import trace_data, verified
from worldsim.view.page import CSP, embed_json, render_page

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WORLDSIM, *args], capture_output=True, text=True, timeout=120, check=False
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_embedded_json_holds_no_character_that_could_end_its_script(value: Any) -> None:
    text = embed_json({"v": value})
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == {"v": value}


def test_non_finite_numbers_embed_as_null() -> None:
    assert json.loads(embed_json([float("nan"), float("inf"), 1.5])) == [None, None, 1.5]


def test_the_page_loads_nothing_from_anywhere(demo_trace: Path) -> None:
    page = trace_page(demo_trace)
    html = render_page(page.kind, page.data, title=page.title)
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in html.replace(
        "&#39;", "'"
    )
    assert "default-src 'none'" in CSP and "connect-src" not in CSP
    assert re.search(r"<(link|img|iframe|object|embed|base)\b", html) is None
    assert re.search(r"<script[^>]*\bsrc\s*=", html) is None
    # the data is the one application/json element, and the page's two scripts follow it
    assert html.count('<script type="application/json" id="data">') == 1


def test_hostile_text_stays_inside_the_data_element(hostile_trace: Path) -> None:
    page = trace_page(hostile_trace)
    html = render_page(page.kind, page.data, title=page.title)
    blob = html.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(blob) == json.loads(embed_json(page.data))
    assert HOSTILE in set(_strings(json.loads(blob)))  # it is there, as data
    assert "document.title='pwned'" not in html.split("<body", 1)[0]  # not in the title


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_the_ticks_are_what_replay_prints(demo_trace: Path) -> None:
    data = trace_data(verified(demo_trace))
    replayed = [
        json.loads(line)
        for line in cli("replay", str(demo_trace), "--json").stdout.splitlines()
        if line.startswith('{"timeline"')
    ]
    assert [(s["timeline"], s["tick"]) for s in data["ticks"]] == [
        (r["timeline"], r["tick"]) for r in replayed
    ]
    for step, r in zip(data["ticks"], replayed, strict=True):
        assert [p["summary"] for p in step["proposals"]] == [p["summary"] for p in r["proposals"]]
        assert [f"{p['agent']}#{p['index']}" for p in step["proposals"] if p["accepted"]] == r[
            "accepted"
        ]
        assert step["ledger_changes"] == r["ledger_changes"] and step["digest"] == r["digest"]
        assert step["forks"] == r["forks"] and step["fork_rejections"] == r["fork_rejections"]
    assert {t["id"] for t in data["timelines"]} == {s["timeline"] for s in data["ticks"]}
    assert len(data["timelines"]) == 4 and data["verification"]["complete"]


def test_a_damaged_trace_is_refused_in_one_line_and_nothing_is_written(
    demo_trace: Path, tmp_path: Path
) -> None:
    lines = demo_trace.read_bytes().splitlines(keepends=True)
    lines[9] = lines[9].replace(b'"tick":0', b'"tick":1', 1)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    out = tmp_path / "view.html"
    proc = cli("view", str(damaged), "-o", str(out))
    assert proc.returncode == cli("verify", str(damaged)).returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{damaged}:11: hash chain broken" in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [damaged]


def test_a_cut_off_run_is_shown_and_marked_incomplete(demo_trace: Path, tmp_path: Path) -> None:
    lines = demo_trace.read_bytes().splitlines(keepends=True)
    last_commit = max(i for i, line in enumerate(lines[:200]) if b'"tick_committed"' in line)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[: last_commit + 1]) + b'{"v":2,"seq":')
    v = trace_data(verified(cut))["verification"]
    assert v["complete"] is False and v["seal"] == "absent"
    assert v["torn_line"] == last_commit + 2 and v["terminal"] is None


def test_the_cli_writes_beside_the_trace_and_prints_the_path(demo_trace: Path) -> None:
    proc = cli("view", str(demo_trace))
    expected = demo_trace.with_suffix(".html")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(expected) and expected.read_text().startswith("<!doctype")


def test_a_hindsight_graph_adds_the_causal_pressure(demo_trace: Path, tmp_path: Path) -> None:
    page = build_page([demo_trace], hindsight=ROOT / "scenarios/hindsight/merger-review.json")
    pressure = page.data["pressure"]
    assert pressure["causal"] and pressure["simulated"]
    assert all(isinstance(v, float) for _, v in pressure["causal"])


def test_a_hindsight_graph_score_would_refuse_is_refused(demo_trace: Path, tmp_path: Path) -> None:
    graph = json.loads((ROOT / "scenarios/hindsight/merger-review.json").read_text())
    graph["edges"][0]["target"] = "nonesuch"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(graph))
    with pytest.raises(ConfigError) as refused:
        build_page([demo_trace], hindsight=broken)
    assert str(refused.value) == f"{broken}: edges.0.target: unknown event 'nonesuch'"
    proc = cli("view", str(demo_trace), "--hindsight", str(broken), "-o", str(tmp_path / "v.html"))
    assert proc.returncode == 2 and not (tmp_path / "v.html").exists()
    assert proc.stderr.strip() == f"error: {broken}: edges.0.target: unknown event 'nonesuch'"


def test_a_hindsight_graph_not_built_is_charted_with_a_note(
    demo_trace: Path, tmp_path: Path
) -> None:
    """As `hindsight pressure` charts it: said, since scoring leaves such a graph out."""
    graph = json.loads((ROOT / "scenarios/hindsight/merger-review.json").read_text())
    graph.update(graph_built=False, failed_gates=["sources: 3; at least 20"])
    unbuilt = tmp_path / "unbuilt.json"
    unbuilt.write_text(json.dumps(graph))
    proc = cli("view", str(demo_trace), "--hindsight", str(unbuilt), "-o", str(tmp_path / "v.html"))
    assert proc.returncode == 0 and (tmp_path / "v.html").is_file()
    assert proc.stderr.strip() == (
        f"note: {unbuilt}: graph_built: false, so scoring leaves it out "
        "(failed gate: sources: 3; at least 20); charted all the same"
    )


def test_other_input_counts_are_refused(demo_trace: Path) -> None:
    with pytest.raises(ConfigError, match="one trace, or two"):
        build_page([demo_trace] * 3)
    with pytest.raises(ConfigError, match="not a directory"):
        build_page([demo_trace.parent])


# --------------------------------------------------------------------------- comparisons


def _steps(keys: list[tuple[int, str]], digests: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "tick": k,
            "timeline": t,
            "digest": d,
            "mass": 1.0,
            "ledger_changes": [],
            "proposals": [],
            "review": None,
        }
        for (k, t), d in zip(keys, digests, strict=True)
    ]


timeline_ids = st.sampled_from(["t0", "t0.1", "t0.2", "t0.1.1", "t0.10"])


@given(
    st.lists(st.tuples(st.integers(0, 6), timeline_ids), min_size=1, max_size=20, unique=True),
    st.data(),
)
def test_the_first_divergence_is_the_earliest_in_simulated_order(
    keys: list[tuple[int, str]], data: st.DataObject
) -> None:
    digests = [f"d{i}" for i in range(len(keys))]
    changed = data.draw(st.sets(st.integers(0, len(keys) - 1)))
    other = [d + "x" if i in changed else d for i, d in enumerate(digests)]
    found = first_divergence(_steps(keys, digests), _steps(keys, other), lambda s: s["digest"])
    if not changed:
        assert found is None
        return

    def order(k: tuple[int, str]) -> tuple[int, tuple[int, ...]]:
        return k[0], tuple(int(p) for p in k[1][1:].split("."))

    first = min((keys[i] for i in changed), key=order)
    assert found is not None and (found["tick"], found["timeline"]) == first
    assert found["only"] is None


def test_a_timeline_only_one_run_has_is_a_divergence() -> None:
    a = _steps([(0, "t0"), (1, "t0"), (1, "t0.1")], ["a", "b", "c"])
    found = first_divergence(a, a[:2], lambda s: s["digest"])
    assert found is not None and found["only"] == "a" and found["b"] is None
    assert (found["tick"], found["timeline"]) == (1, "t0.1")


def test_compare_finds_where_two_seeds_part(demo_trace: Path, run: Any, demo_card: Any) -> None:
    other = Path(run(demo_card, "branching", seed=7).trace)
    same = compare_data(trace_data(verified(demo_trace)), trace_data(verified(demo_trace)))
    assert same["state"] is None and same["ledger"] is None
    data = build_page([demo_trace, other]).data
    assert data["state"] is not None and data["ledger"] is not None
    assert (data["state"]["tick"], data["state"]["timeline"]) <= (
        data["ledger"]["tick"],
        data["ledger"]["timeline"],
    )
    out = write_view(build_page([demo_trace, other]), default_output([demo_trace, other]))
    assert out.name == f"{demo_trace.stem}__vs__{other.stem}.html"


def test_compare_refuses_two_different_cards(demo_trace: Path, run: Any) -> None:
    from worldsim.domain.cards import load_card

    other = Path(run(load_card(ROOT / "scenarios/space-launch.yaml"), "no_branch", seed=1).trace)
    proc = cli("view", str(demo_trace), str(other), "-o", str(other.with_suffix(".html")))
    assert proc.returncode == 2 and "two runs of one card" in proc.stderr
    assert not other.with_suffix(".html").exists()


def test_the_banner_checks_the_anchor_and_signature_it_is_given(
    demo_card: Any, tmp_path: Path
) -> None:
    from tests.support import DEMO_CARD, invoke

    key = tmp_path / "k.key"
    assert invoke("keygen", key).code == 0
    other = tmp_path / "other.key"
    assert invoke("keygen", other).code == 0
    made = invoke("run", DEMO_CARD, "--ticks", "3", "--out", tmp_path, "--sign-key", key)
    assert made.code == 0, made.err
    trace = next(tmp_path.glob("*.jsonl"))
    result = verified(trace)
    head = result.head
    assert head is not None
    pub = Path(f"{key}.pub")

    out = tmp_path / "checked.html"
    shown = invoke("view", trace, "-o", out, "--expect-head", head, "--public-key", pub)
    assert shown.code == 0, shown.err
    page = trace_page(trace, expect_head=head, public_key=_public(pub))
    banner = page.data["verification"]
    assert banner["anchor"] == "head matches --expect-head"
    assert banner["signature"]["checked"] is True
    unchecked = trace_page(trace).data["verification"]
    assert unchecked["anchor"] is None and unchecked["signature"]["checked"] is False

    for args in (("--expect-head", "0" * 64), ("--public-key", f"{other}.pub")):
        refused = tmp_path / "refused.html"
        bad = invoke("view", trace, "-o", refused, *args)
        assert bad.code == invoke("verify", trace, *args).code == 1, bad.err
        assert not refused.exists()
    prefix = invoke("view", trace, "-o", tmp_path / "p.html", "--expect-head", head[:16])
    assert prefix.code == 2 and "64 hex digits" in prefix.err
    pair = invoke("view", trace, trace, "-o", tmp_path / "c.html", "--public-key", pub)
    assert pair.code == 2 and "apply to one trace" in pair.err


def _public(path: Path) -> Any:
    from worldsim.trace.signing import load_public_key

    return load_public_key(path)
