"""A tick's agents of one role, acting: together where the role decides them at once, else
each with its own view, concurrently.

The engine hands each tick role its agents as one :class:`~worldsim.world.views.TickBatch`.
A role with ``act_batch`` (:class:`BatchRole`) answers for all of them in one call, as the
prompt actor on the offline route does (the offline actors are array-like rules, and a role
conversation, a model round and a task per agent cost more than the agent's decision); any
other role's ``act`` runs once per agent, on at most ``MAX_CONNECTIONS`` tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import anyio

from worldsim.domain.bounds import MAX_CONNECTIONS
from worldsim.domain.errors import ModelError, RoleError
from worldsim.domain.logs import get_logger
from worldsim.gateway import AgentTools
from worldsim.roles.calling import call_role, check_items, role_name
from worldsim.roles.contracts import AgentRole
from worldsim.world.columns import MoveColumns
from worldsim.world.moves import Proposal
from worldsim.world.views import TickBatch, TickContext

__all__ = ["Acted", "BatchRole", "act_each", "act_tick", "agent_context"]

log = get_logger(__name__)


Acted = Mapping[str, Sequence[Proposal]] | MoveColumns
"""A tick's agents' proposals: by agent, or one move per agent as columns."""


@runtime_checkable
class BatchRole(AgentRole, Protocol):
    """A tick role that decides a tick's agents together: the same proposals as its ``act``
    would give each agent, by agent or as columns."""

    async def act_batch(self, batch: TickBatch) -> Acted: ...


async def act_tick(role: AgentRole, batch: TickBatch) -> Acted:
    """Each agent's proposals, by agent or as columns: from ``act_batch`` when the role has it
    (a RoleError when it raises, answers something else or answers for an agent it was not
    handed), else :func:`act_each`.

    When ``act_batch`` fails on a model call, its agents sit the tick out, as one agent does
    whose call fails in :func:`act_each` (a failure that `ModelError.ends_run` ends the run)."""
    if not isinstance(role, BatchRole):
        return await act_each(role, batch)
    try:
        answered: Acted = await call_role(
            role, "act_batch", batch, (Mapping, MoveColumns), "a mapping of agent to proposals"
        )
    except ModelError as exc:
        if exc.ends_run:
            raise
        log.warning(
            "agents_failed",
            role=role_name(role),
            agents=len(batch.agents),
            timeline=batch.timeline,
            tick=batch.tick,
            error=str(exc),
        )
        return {}
    if isinstance(answered, MoveColumns):
        decided: Sequence[str] = answered.agents
    else:
        decided = list(answered)
        for agent, made in answered.items():
            if not isinstance(made, list | tuple):
                raise RoleError(
                    f"role '{role_name(role)}': act_batch returned {type(made).__name__} for "
                    f"agent '{agent}', not a list of Proposal"
                )
            check_items(role, "act_batch", made, Proposal)
    strays = sorted(set(decided).difference(batch.agents))
    if strays:
        raise RoleError(
            f"role '{role_name(role)}': act_batch answered for "
            f"agents it was not handed ({', '.join(strays[:5])}); it answers for "
            "batch.agents only"
        )
    return answered


def agent_context(batch: TickBatch, i: int) -> TickContext:
    """Agent ``i``'s own view: the batch's snapshot, its generator, its gateway tools."""
    agent = batch.agents[i]
    return TickContext(
        card=batch.card,
        timeline=batch.timeline,
        tick=batch.tick,
        ticks=batch.ticks,
        date=batch.date,
        agent=agent,
        state=batch.state,
        observations=batch.observations,
        rng=batch.rngs[i],
        tools=(
            AgentTools(batch.gateway, agent, batch.timeline, batch.tick)
            if batch.gateway is not None
            else None
        ),
    )


def _own(role: object, agent: str, made: Sequence[Proposal]) -> Sequence[Proposal]:
    """``made``, when every proposal in it is the agent's own."""
    strays = sorted({p.agent for p in made} - {agent})
    if strays:
        raise RoleError(
            f"role '{role_name(role)}': act proposed for agent '{strays[0]}' when asked for "
            f"agent '{agent}'; it proposes for ctx.agent only"
        )
    return made


class _Acting(Protocol):
    async def act(self, ctx: TickContext) -> Sequence[Proposal]: ...


async def act_each(role: _Acting, batch: TickBatch) -> dict[str, Sequence[Proposal]]:
    """``role.act`` for every agent, concurrently, on as many tasks as a route may hold
    connections (one each up to that: a task per agent cost more than an offline step).

    An agent whose reply stayed invalid sits the tick out (the failed call is in the trace); a
    failure that `ModelError.ends_run` (a route that gave no reply, a strict replay's miss)
    ends the run."""
    results: dict[str, Sequence[Proposal]] = {}

    async def act(i: int) -> None:
        agent = batch.agents[i]
        try:
            made = await call_role(
                role, "act", agent_context(batch, i), (list, tuple), "a list of Proposal"
            )
        except ModelError as exc:
            if exc.ends_run:
                raise
            log.warning(
                "agent_failed",
                agent=agent,
                timeline=batch.timeline,
                tick=batch.tick,
                error=str(exc),
            )
            results[agent] = []
            return
        check_items(role, "act", made, Proposal)
        results[agent] = _own(role, agent, made)

    queue = iter(range(len(batch.agents)))

    async def work() -> None:
        for i in queue:
            await act(i)

    async with anyio.create_task_group() as tasks:
        for _ in range(min(len(batch.agents), MAX_CONNECTIONS)):
            tasks.start_soon(work)
    return results
