"""Replay of a continued run's particles and re-weighting (:mod:`worldsim.trace.lineage`):
``verify`` checks the arithmetic from the trace alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from worldsim.domain.cards import EvidenceDoc
from worldsim.domain.errors import StateError
from worldsim.domain.policy import BranchPolicy
from worldsim.trace.lineage import NewsData, ParentRef, news_data
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
    (checked against its digest) becomes its timeline's cursor at its prior mass; each
    ``news`` record lies in [since, as_of) of the run's parent reference, in date-then-id
    order, and is the card's document of its id (when the card holds its evidence, the news is
    exactly its documents in that window, at most ``max_news``); the ``likelihood`` records
    are checked against their documents and the news, and the ``reweighting`` record against
    :func:`reweigh` of the priors and likelihoods, exactly; its posteriors become the
    cursors' masses."""

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
        self.ref: ParentRef | None = None
        self.window: tuple[datetime, datetime] | None = None
        self.expected: list[NewsData] | None = None
        self.last_news: tuple[datetime, str] | None = None

    def start(self, line: TraceLine) -> None:
        """The run's header: a continued run's parent reference and the news its card gives.
        A trace whose header a check cannot read is refused by the schema first."""
        data = line.data
        ref = getattr(data, "parent", None)
        if ref is None:
            return
        since, as_of, origin = (_moment(v) for v in (ref.since, ref.as_of, ref.origin))
        if since is None or as_of is None or origin is None:
            raise line.error("parent: since, as_of or origin is not a date and time")
        if not origin <= since < as_of:
            raise line.error(
                f"parent: since {ref.since} is not in [origin {ref.origin}, as_of {ref.as_of})"
            )
        if data.forecast_date is not None and _moment(data.forecast_date) != as_of:
            raise line.error(
                f"parent.as_of {ref.as_of} is not the run's forecast_date {data.forecast_date}"
            )
        self.ref, self.window = ref, (since, as_of)
        evidence = data.card.get("evidence")
        if not isinstance(evidence, list):
            return  # a database the trace does not hold: the window and order are checked
        try:
            docs = [EvidenceDoc.model_validate(d) for d in evidence]
            max_news = BranchPolicy.model_validate(data.policy).news.max_news
        except (ValidationError, ValueError, TypeError) as exc:
            raise line.error(f"the card's evidence or the policy cannot be read: {exc}") from None
        seen: set[str] = set()
        window = []
        for d in docs:  # the gateway keeps the first of a repeated id
            if d.id not in seen:
                seen.add(d.id)
                if since <= d.published_at < as_of:
                    window.append(d)
        window.sort(key=lambda d: (d.published_at, d.id))
        self.expected = [
            news_data(d.id, d.published_at, d.title, d.text, d.stance, d.source)
            for d in window[: max(max_news, 0)]
        ]

    def note(self, line: TraceLine, cursors: dict[str, Any]) -> None:
        data, tl = line.data, line.tl
        if line.type == "news":
            self._check_news(line)
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

    def _check_news(self, line: TraceLine) -> None:
        data = line.data
        if self.ref is None or self.window is None:
            raise line.error("news in a run that continues no parent")
        if self.likelihood:
            raise line.error("news after the particles' likelihoods")
        since, as_of = self.window
        when = _moment(data.published_at)
        if when is None or not since <= when < as_of:
            raise line.error(
                f"news {data.id} published_at {data.published_at} is not in "
                f"[since {self.ref.since}, as_of {self.ref.as_of})"
            )
        if self.last_news is not None and (when, data.id) <= self.last_news:
            raise line.error(f"news {data.id} is not in date-then-id order after the last")
        self.last_news = (when, data.id)
        if self.expected is None:
            return
        at = len(self.news)
        if at >= len(self.expected):
            raise line.error(
                f"news {data.id}: the card gives {len(self.expected)} documents of news in "
                f"[{self.ref.since}, {self.ref.as_of}), this is one more"
            )
        want = self.expected[at]
        if data != want:
            differ = [k for k in NewsData.model_fields if getattr(data, k) != getattr(want, k)]
            raise line.error(
                f"news {data.id} is not the card's document {want.id} ({', '.join(differ)} differ)"
            )

    def _check_news_complete(self, line: TraceLine) -> None:
        if self.expected is not None and len(self.news) != len(self.expected):
            raise line.error(
                f"{len(self.news)} documents of news recorded; the card gives "
                f"{len(self.expected)} in [{self.ref.since if self.ref else ''}, "
                f"{self.ref.as_of if self.ref else ''})"
            )

    def _check_likelihood(self, line: TraceLine, cursors: dict[str, Any]) -> None:
        data, tl = line.data, line.tl
        self._check_news_complete(line)
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
        self._check_news_complete(line)
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


def _moment(value: str) -> datetime | None:
    """An ISO date and time with its zone, or None."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else None
