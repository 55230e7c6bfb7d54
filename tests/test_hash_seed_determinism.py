"""Every output is the same under every PYTHONHASHSEED.

Set and dict-of-set iteration order depends on the hash seed of the process; none of it may
reach a trace, a score, a graph or a ranking. Each probe runs the real CLI in a fresh
interpreter with a different hash seed, in the same folder, and prints what the commands wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT
from tests.test_cli import WORLDSIM
from worldsim.testing import StubServer

PROBE = r"""
import json, shutil, sys
from pathlib import Path
from typer.testing import CliRunner
from worldsim.cli import app

root, work = Path(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir()
runner = CliRunner()
out = {}

# a run's random id and wall-clock times, and its head, which hashes both
VOLATILE = {"run", "run_id", "run_ids", "ts", "wall_s", "latency_s", "head"}

def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value

def parsed(text):
    try:
        return stable(json.loads(text))
    except ValueError:
        try:
            return [stable(json.loads(line)) for line in text.splitlines()]
        except ValueError:
            return text

def cli(key, *args):
    result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, (key, result.output)
    out[key] = parsed(result.stdout)

for card in ("merger-review", "election-runoff"):
    cli("run " + card, "run", root / "scenarios" / f"{card}.yaml", "--policy", "branching",
        "--seed", "1", "--out", work / "traces", "--json")
    trace = work / "traces" / f"{card}__branching__s1.jsonl"
    graph = root / "scenarios" / "hindsight" / f"{card}.json"
    cli("verify " + card, "verify", trace, "--canonical")
    cli("ker " + card, "hindsight", "ker", trace, "--hindsight", graph, "--json")
    cli("sources " + card, "hindsight", "sources", trace, "--hindsight", graph, "--json")
    cli("graph " + card, "hindsight", "forecast-graph", trace, "-o", work / f"{card}.graph.json")
    out["graph file " + card] = parsed((work / f"{card}.graph.json").read_text())

cli("score", "score", work / "traces", "--labels", root / "scenarios" / "labels",
    "--allow-unlabelled", "--bootstrap", "200", "--hindsight", root / "scenarios" / "hindsight",
    "--json", work / "score.json")
out["score file"] = parsed((work / "score.json").read_text())

# ranking ties: several documents that score exactly alike, and one later than the cut-off
articles = work / "articles.jsonl"
with articles.open("w") as fh:
    for n in range(6):
        fh.write(json.dumps({"id": f"doc-{n}", "title": "regulator review of the merger",
                             "text": "the regulator opens a review of the merger",
                             "published_at": f"2026-01-0{n + 1}T00:00:00Z"}) + "\n")
cli("ingest", "gateway", "ingest", articles, "--db", work / "evidence.db")
cli("search", "gateway", "search", "regulator merger review", "--db", work / "evidence.db",
    "--before", "2026-01-06T00:00:00Z", "-k", "10", "--json")
print(json.dumps(out, sort_keys=True).replace(str(work), "WORK"))
"""


def _probe(seed: int, work: Path) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "COLUMNS": "120"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), str(work)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_every_output_is_the_same_under_every_hash_seed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    outputs = {seed: _probe(seed, work) for seed in (0, 1, 7, 12345)}
    first = outputs[0]
    for seed, text in outputs.items():
        assert text == first, f"PYTHONHASHSEED={seed} changes an output"
    report = json.loads(first)
    # the probe really produced what it compares: a search with ties, two runs, a score
    hits = report["search"]
    assert len(hits) == 5 and {h["id"] for h in hits} == {f"doc-{n}" for n in range(5)}
    assert len({h["score"] for h in hits}) == 1  # all tied: the order is the tie-break's
    assert [run["card_id"] for run in (report["run merger-review"], report["run election-runoff"])]
    assert {c["card_id"] for c in report["score file"]["axes"]["cards"]} == {
        "merger-review",
        "election-runoff",
    }
    assert report["ker merger-review"]["matches"] and report["graph file merger-review"]["events"]


def test_a_model_governed_run_asks_and_ends_the_same_under_every_hash_seed(
    tmp_path: Path,
) -> None:
    """The governance prompt lists the open hypotheses: in a map's order they followed the hash
    seed, so the same run asked other prompts (and a strict replay of it missed)."""
    card = ROOT / "scenarios" / "merger-review.yaml"
    with StubServer(seed=4, content_by_request=True) as server:
        base = {**os.environ, "STUB_BASE_URL": server.base_url, "STUB_API_KEY": "k"}
        heads = []
        for seed in (1, 2):
            out = tmp_path / f"h{seed}"
            env = {**base, "PYTHONHASHSEED": str(seed)}
            args = ["--role-model", "governance=stub/test-model", "--cache", "off"]
            made = subprocess.run(
                [*WORLDSIM, "run", str(card), *args, "--out", str(out), "--json"],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            assert made.returncode == 0, made.stderr[-2000:]
            trace = json.loads(made.stdout)["trace"]
            verified = subprocess.run(
                [*WORLDSIM, "verify", trace, "--canonical"],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            assert verified.returncode == 0, verified.stderr
            heads.append(verified.stdout.strip())
        governed = [r for r in server.requests if "governance" in json.dumps(r.body)]
        assert governed  # the route was asked, so the prompts were compared
    assert heads[0] == heads[1]
