"""Replay of a continued run's particles and re-weighting (:mod:`worldsim.trace.lineage`):
``verify`` checks the arithmetic from the trace alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from worldsim.domain.errors import StateError
from worldsim.trace.reader import TraceLine
from worldsim.world.particles import (
    NoSurvivors,
    likelihood_product,
    reweigh,
    reweighted_value,
)
from worldsim.world.state import WorldState, state_digest

__all__ = ["ParticleCheck"]


class ParticleCheck:
    """A continued run's particles as replay meets them: each ``particle`` record's state
    (checked against its digest) becomes its timeline's cursor at its prior mass; the
    ``likelihood`` records are checked against their documents and the news, and the
    ``reweighting`` record against :func:`reweigh` of the priors and likelihoods, exactly;
    its posteriors become the cursors' masses."""

    def __init__(
        self,
        on_start: Callable[[str, WorldState, float], None] | None,
        cursor: Callable[[WorldState, float], Any],
    ) -> None:
        self.on_start = on_start
        self.cursor = cursor
        self.world: WorldState | None = None
        self.order: list[str] = []
        self.news: list[str] = []
        self.likelihood: dict[str, float] = {}

    def note(self, line: TraceLine, cursors: dict[str, Any]) -> None:
        data, tl = line.data, line.tl
        if line.type == "news":
            self.news.append(data.id)
        elif line.type == "particle":
            if tl is None or tl in cursors:
                raise line.error(f"particle {tl} given twice or without a timeline")
            try:
                state = WorldState.from_json(data.state)
            except (StateError, KeyError, IndexError, TypeError, ValueError) as exc:
                raise line.error(f"particle state cannot be read: {exc}") from None
            if state_digest(state) != data.digest:
                raise line.error("particle state does not match its digest")
            cursors[tl] = self.cursor(state, data.mass)
            self.order.append(tl)
            self.world = self.world or state
        elif line.type == "likelihood":
            self._check_likelihood(line, cursors)
        else:
            self._check_reweighting(line, cursors)

    def _check_likelihood(self, line: TraceLine, cursors: dict[str, Any]) -> None:
        data, tl = line.data, line.tl
        if tl not in cursors or tl in self.likelihood:
            raise line.error(f"likelihood for unknown or already judged particle {tl}")
        if [d.doc_id for d in data.documents] != self.news:
            raise line.error("likelihood documents differ from the news, in order")
        for d in data.documents:
            if not 0.0 <= d.raw <= 1.0 or d.used != max(data.epsilon, d.raw):
                raise line.error(f"likelihood of {d.doc_id}: used is not max(epsilon, raw)")
        if data.likelihood != likelihood_product([d.used for d in data.documents]):
            raise line.error("particle likelihood is not the product of its documents'")
        self.likelihood[tl] = data.likelihood

    def _check_reweighting(self, line: TraceLine, cursors: dict[str, Any]) -> None:
        data = line.data
        rows = data.rows
        if [r.timeline for r in rows] != self.order or set(self.likelihood) != set(self.order):
            raise line.error("re-weighting rows differ from the particles and their likelihoods")
        for r in rows:
            if r.prior != cursors[r.timeline].mass or r.likelihood != self.likelihood[r.timeline]:
                raise line.error(f"re-weighting of {r.timeline}: prior or likelihood differs")
        try:
            made = reweigh([r.prior for r in rows], [r.likelihood for r in rows], data.prune_below)
        except NoSurvivors as exc:
            raise line.error(f"re-weighting recorded where none survives: {exc}") from None
        if (
            made.posterior != tuple(r.posterior for r in rows)
            or made.pruned != tuple(r.pruned for r in rows)
            or made.evidence != data.evidence
            or made.effective_paths != data.effective_paths
        ):
            raise line.error("re-weighting differs from m·L / Σ m·L with its pruning")
        values = [r.value for r in rows]
        if data.p_yes_reweighted is not None and (
            None in values
            or data.p_yes_reweighted
            != reweighted_value(made.posterior, [v for v in values if v is not None])
        ):
            raise line.error("p_yes re-weighted is not Σ w·v over the particles")
        for r in rows:
            cursor = cursors[r.timeline]
            cursor.mass = r.posterior
            if self.on_start is not None:
                self.on_start(r.timeline, cursor.state, cursor.mass)
