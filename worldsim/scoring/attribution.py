"""What moved a forecast: each fork's contribution and, for a continued run, each piece of
news's (docs/concepts.md).

*Forks.* A fork's contribution is p_yes minus p_yes with that fork's subtree folded back into
its parent's leaf (the subtree's mass returned to the parent's leaf, at the parent's value),
taken in reverse fork order; what is left when every fork is folded is the *base*. So the base
and the contributions add up to p_yes.

*News.* A continued run's particles each stand for a subtree of the parent; v_i is the parent's
outcome value of particle i's subtree (the mass-weighted value of the parent's leaves that
descend from it, nearer particles apart). Applying the news in date order, a document's
contribution is the change it makes to Σ w·v; pruning adds its own; the result is the parent's
futures re-weighted without new simulation (*p_yes re-weighted*). The runs after the cut then
move it to the base, and the continued run's own forks to p_yes.

Every trace is read through the one gate (`worldsim.trace.verify.stream_records`); the parent
through it too, anchored at the head the continued run names. Binary cards only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ConfigError, WorldsimError
from worldsim.trace.verify import stream_records, verified_lines
from worldsim.world.extraction import EXTRACTION_VALUES, Leaf
from worldsim.world.particles import subtree_values

__all__ = ["Attribution", "Contribution", "attribute", "forecast_path", "parent_path"]

_READ = ("run_started", "fork", "timeline_ended", "particle", "likelihood", "reweighting")


@dataclass(frozen=True, slots=True)
class Contribution:
    """One cause and how much it moved p_yes: ``kind`` is ``fork`` (``what``: the child
    timeline), ``news`` (a document id), ``pruning`` or ``runs`` (the runs after the cut)."""

    kind: str
    what: str
    tick: int | None
    amount: float
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Attribution:
    card_id: str
    trace: Path
    p_yes: float
    base: float
    contributions: list[Contribution] = field(default_factory=list)
    parent_p_yes: float | None = None
    p_reweighted: float | None = None

    @property
    def ranked(self) -> list[Contribution]:
        """The contributions, largest first (by size)."""
        return sorted(self.contributions, key=lambda c: (-abs(c.amount), c.kind, c.what))

    @property
    def start(self) -> float:
        """What the contributions start from: the parent's p_yes for a continued run, else
        the base."""
        return self.base if self.parent_p_yes is None else self.parent_p_yes

    def as_json(self) -> dict[str, Any]:
        return {
            "card_id": self.card_id,
            "trace": str(self.trace),
            "p_yes": self.p_yes,
            "base": self.base,
            "parent_p_yes": self.parent_p_yes,
            "p_reweighted": self.p_reweighted,
            "contributions": [
                {"kind": c.kind, "what": c.what, "tick": c.tick, "amount": c.amount}
                for c in self.ranked
            ],
        }


def _value(started: Mapping[str, Any]) -> Callable[[Leaf], float]:
    return EXTRACTION_VALUES[started["extraction_rule"]]


def _mean(pairs: Sequence[tuple[float, float]]) -> float:
    total = math.fsum(m for m, _ in pairs)
    return math.fsum(m * v for m, v in pairs) / total if total > 0 else 0.0


def _mass_value(leaves: Mapping[str, list[float]]) -> float:
    return _mean([(m, v) for m, v in leaves.values()])


def _leaves(records: Sequence[Any], value: Callable[[Leaf], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in records:
        if r.type == "timeline_ended" and r.tl is not None:
            d = r.data
            leaf = Leaf(r.tl, d["mass"], d["settlement"], d.get("forced_p_yes"), None)
            out[r.tl] = [d["mass"], value(leaf)]
    return out


def _read(path: Path, expect_head: str | None = None) -> list[Any]:
    if expect_head is None:
        return list(stream_records(path, _READ))
    from worldsim.trace.forecast import record_view

    lines = verified_lines(path, expect_head=expect_head)
    return [record_view(line) for line in lines if line.type in _READ]


def attribute(path: str | Path) -> Attribution:
    """The attribution of one trace (see the module's doc); a multiple-choice card or a direct
    forecast is a ConfigError naming the trace."""
    path = Path(path)
    records = _read(path)
    started = records[0].data
    if started.get("kind") == "direct" or started["card"].get("kind", "binary") != "binary":
        raise ConfigError("attribution covers binary multiverse runs only", file=path)
    value = _value(started)
    leaves = _leaves(records, value)
    p_yes = _mass_value(leaves)
    forks = sorted(
        (r for r in records if r.type == "fork"),
        key=lambda r: (r.tick, lineage(r.data["child"])),
    )
    contributions: list[Contribution] = []
    current = p_yes
    for f in reversed(forks):
        parent, child = f.tl, f.data["child"]
        mass, _ = leaves.pop(child)
        leaves[parent][0] += mass
        folded = _mass_value(leaves)
        hypothesis = f.data["candidate"]["hypothesis"]
        contributions.append(Contribution("fork", child, f.tick, current - folded, hypothesis))
        current = folded
    result = Attribution(started["card"]["id"], path, p_yes, current, contributions)
    parent_ref = started.get("parent")
    if parent_ref is None:
        return result
    return _with_news(result, records, parent_ref, value)


def parent_path(child: Path, recorded: str, head: str | None = None) -> Path:
    """Where a continued run's parent is: its recorded path, or a file of that name beside
    the continued trace (a study or a folder moved whole); with ``head``, the first of them
    whose head it is (another run of that name may sit in either place), else the first."""
    found = _parents(child, recorded)
    if not found:
        raise ConfigError(f"the parent trace {recorded} is not found (nor beside it)", file=child)
    return (_at_head(found, head) if head is not None else None) or found[0]


def _ancestor(child: Path, ref: Mapping[str, Any]) -> Path | None:
    """The trace ``ref`` (a continued run's ``parent``) names, where its recorded path or the
    continued trace's folder holds it at its head; None where neither does."""
    return _at_head(_parents(child, ref["path"]), ref["head"])


def _parents(child: Path, recorded: str) -> list[Path]:
    given = Path(recorded)
    return [p for p in dict.fromkeys((given, child.parent / given.name)) if p.is_file()]


def _at_head(paths: list[Path], head: str) -> Path | None:
    """The first of ``paths`` whose trace has ``head``."""
    from worldsim.trace.reader import trace_head

    for path in paths:
        try:
            if trace_head(path) == head:
                return path
        except WorldsimError:
            continue  # a file that does not read as a trace is not the one
    return None


def _with_news(
    result: Attribution,
    records: Sequence[Any],
    ref: Mapping[str, Any],
    value: Callable[[Leaf], float],
) -> Attribution:
    from worldsim.sim.lineage import check_lineage
    from worldsim.trace.reader import read_trace

    where = parent_path(result.trace, ref["path"], ref["head"])
    check_lineage(read_trace(result.trace), where)  # what `verify --parent` checks
    parent = _read(where, expect_head=ref["head"])
    particles = [r.tl for r in records if r.type == "particle"]
    prior = {r.tl: r.data["mass"] for r in records if r.type == "particle"}
    leaves = {tl: (mass, leaf_value) for tl, (mass, leaf_value) in _leaves(parent, value).items()}
    v = subtree_values(leaves, particles)
    docs = {r.tl: r.data["documents"] for r in records if r.type == "likelihood"}
    (weights,) = [r.data for r in records if r.type == "reweighting"]
    parent_p = _mean([(prior[p], v[p]) for p in particles])
    contributions = list(result.contributions)
    w = dict(prior)
    before = parent_p
    for i, doc in enumerate(docs[particles[0]] if particles else []):
        for p in particles:
            w[p] *= docs[p][i]["used"]
        now = _mean([(w[p], v[p]) for p in particles])
        contributions.append(Contribution("news", doc["doc_id"], ref["tick"], now - before))
        before = now
    reweighted = before  # Σ w·v is the same renormalised, unless pruning moved mass
    if any(row["pruned"] for row in weights["rows"]):
        posterior = {row["timeline"]: row["posterior"] for row in weights["rows"]}
        reweighted = _mean([(posterior[p], v[p]) for p in particles])
        moved = reweighted - before
        contributions.append(Contribution("pruning", "prune_below", ref["tick"], moved))
    runs = result.base - reweighted
    contributions.append(Contribution("runs", "after the cut", ref["tick"], runs))
    return Attribution(
        result.card_id,
        result.trace,
        result.p_yes,
        result.base,
        contributions,
        parent_p_yes=parent_p,
        p_reweighted=reweighted,
    )


def forecast_path(child: Path, ref: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The forecast of each run a continued run descends from, oldest first: its date (a
    continued run's own ``as_of``, else its forecast date or its card's as-of), p_yes and
    file. Each is read through the gate at the head its child names; the path stops at an
    ancestor that is not found at that head (another run of its name is not it)."""
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while ref is not None and ref["head"] not in seen:
        seen.add(ref["head"])
        where = _ancestor(child, ref)
        if where is None:  # not found, or another run of its name: the path starts here
            break
        lines = list(verified_lines(where, expect_head=ref["head"]))
        started = lines[0].fields
        done = next((line.fields for line in lines if line.type == "extraction"), None)
        own = started.get("parent")
        date = (
            own["as_of"]
            if own is not None
            else started.get("forecast_date") or str(started["card"]["as_of"])
        )
        path.insert(0, {"date": date, "p_yes": done and done.get("p_yes"), "file": where.name})
        child, ref = where, own
    return path
