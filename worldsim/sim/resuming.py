"""Resuming a run that was cut off: its trace read and replayed to the last committed tick,
its models opened as a new run's are (:mod:`worldsim.sim.session`), and the engine handed the
restore point (:mod:`worldsim.sim.resume`). A call the trace recorded is answered from it, never
paid again. A continued run (``run --continue``) is resumed once its particles are re-weighted;
its parent is read again for the calendar and where its world came from, and must be the run it
continued.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import anyio

from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import ConfigError, WorldsimError
from worldsim.gateway.gateway import check_evidence
from worldsim.models.pool import Shared
from worldsim.models.recorded import RecordedReplies
from worldsim.roles.registry import RoleSpec
from worldsim.sim.continuation import Continuation, ContinuingEngine
from worldsim.sim.failure import guarded
from worldsim.sim.plan import (
    ModelSource,
)
from worldsim.sim.resume import Cut, has_world, recorded_spend, restore_point, resume_config
from worldsim.sim.scheduler import Observer
from worldsim.sim.session import open_session, prepare, run_budget, run_card
from worldsim.sim.settlement import RunResult
from worldsim.trace.reader import Trace, read_trace
from worldsim.trace.records import RunResumedData
from worldsim.trace.signing import Signer
from worldsim.trace.writer import TraceLock, TraceWriter

__all__ = ["resume_run"]


async def resume_run(
    path: str | Path,
    *,
    models: ModelConfig | None = None,
    fsync: bool = True,
    observer: Observer | None = None,
    model_source: ModelSource | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    signer: Signer | None = None,
) -> RunResult:
    """Continue the run whose trace is ``path``, appending to the same file.

    The settings come from the trace's header; ``models`` may change cache, budget or limits
    (the routes always come from the trace). The budget continues from what the trace records
    as spent, unless ``shared`` holds a budget (whose spend its owner keeps) to replace it.
    ``signer`` signs the new sealed last record. The trace is locked before it is read, so no
    other writer can add to it between the read and the resume. A new run cut off before its
    world was initialized has nothing to carry on from: it runs again from its recorded
    settings, into the same file.
    """
    with await anyio.to_thread.run_sync(TraceLock.take, path, "existing") as lock:
        trace = read_trace(lock.path)
        _check_signer(trace, signer)
        if _before_its_world(trace):  # nothing to carry on from: the run starts again, in place
            config = resume_config(trace, models)
            lock.release()  # run_card takes the trace's lock again to replace it
            return await run_card(
                config,
                trace_path=path,
                max_trace_mb=None,
                observer=observer,
                overwrite=True,
                fsync=fsync,
                model_source=model_source,
                environ=environ,
                shared=shared,
                signer=signer,
            )
        cut = Cut(trace)
        prepared = prepare(resume_config(trace, models), max_trace_mb=None)
        config, plan = prepared.config, prepared.plan
        point = restore_point(cut, config)
        continued = _continuation(trace, models, config)
        _check_prompts(trace, [*plan.values(), *([continued.assessor] if continued else [])])
        if continued is not None:
            point = replace(point, world_source=continued.world_source)
        await check_evidence(config.card, card_path=config.card_path)
        shared = shared or Shared()
        if shared.budget is None:
            budget = run_budget(config.models, recorded_spend(trace))
            shared = Shared(budget, shared.limiters, shared.clients)
        # every call the trace holds an answer to is answered from it, not paid again
        recorded = RecordedReplies(line.data for line in trace.lines if line.type == "llm_call")
        async with open_session(
            config,
            lock.path.parent,
            model_source=model_source,
            environ=environ,
            shared=shared,
            recorded=recorded,
        ) as session:
            writer = await TraceWriter.append_to(
                trace.path,
                trace.run_id,
                seq=len(trace.lines),
                prev=trace.head,
                keep_bytes=trace.end_offset,
                fsync=fsync,
                lock=lock,
            )
            writer.signer = signer
            made = [
                session.engine(writer, plan, observer)
                if continued is None
                else ContinuingEngine(
                    continued, writer, plan, session.source, observer, session.guard
                )
            ]

            async def body() -> RunResult:  # the engine lives only while it runs (see guarded)
                engine = made.pop()
                await writer.emit(
                    "run_resumed",
                    RunResumedData(
                        after_seq=trace.lines[-1].record.seq,
                        reason=f"resumed after {cut.cause}",
                        voided=cut.voided,
                    ),
                    durable=True,
                )
                return await engine.resume(point)

            return await guarded(writer, body, has_world=lambda: True)  # as Cut found
    raise AssertionError("unreachable")  # pragma: no cover


def _before_its_world(trace: Trace) -> bool:
    """Whether ``trace`` is a new simulation (not a continued run, not a direct forecast) that
    ended or was cut off before its world was initialized."""
    started = trace.started
    return (
        not trace.complete
        and started.parent is None
        and started.kind != "direct"
        and not has_world(trace)
    )


def _continuation(
    trace: Trace, models: ModelConfig | None, config: RunConfig
) -> Continuation | None:
    """A continued run's parent, read and verified again: where the run found it, or beside
    it, and the same run (head, canonical hash, cut). ``None`` for a run that continues none."""
    ref = trace.started.parent
    if ref is None:
        return None
    places = dict.fromkeys((Path(ref.path), trace.path.parent / Path(ref.path).name))
    found = [place for place in places if place.is_file()]
    if not found:
        raise ConfigError(
            "resuming a continued run reads its parent, which is at none of "
            f"{', '.join(map(str, places))}: put the parent trace back",
            file=trace.path,
        )
    for i, place in enumerate(found):  # another run of the parent's name may sit in either
        try:
            continued = Continuation(place, datetime.fromisoformat(ref.as_of), models)
        except WorldsimError:
            if i + 1 < len(found):
                continue  # not a run this one could continue: the other place may hold it
            raise
        if continued.ref.model_dump(exclude={"path"}) == ref.model_dump(exclude={"path"}):
            continued.config = config
            return continued
    which = " and ".join(map(str, found))
    raise ConfigError(
        f"{which} {'is' if len(found) == 1 else 'are'} not the run this one continued (its "
        "head, canonical hash or cut differs): put the parent trace back",
        file=trace.path,
    )


def _check_prompts(trace: Trace, specs: Iterable[RoleSpec]) -> None:
    """The run goes on under the prompts it started with: a role whose prompt file changed
    since (another version than ``run_started.prompt_versions`` records) is refused, naming
    the file, before anything is written."""
    recorded = trace.started.prompt_versions
    for spec in specs:
        was = recorded.get(spec.name)
        if was is not None and was != spec.version:
            raise ConfigError(
                f"role '{spec.name}' is prompt version {spec.version} now and the run started "
                f"under {was}: restore the file the run started with to resume it, or run it "
                "again (--force)",
                file=spec.prompt.path if spec.prompt is not None else trace.path,
            )


def _check_signer(trace: Trace, signer: Signer | None) -> None:
    """A run started to be signed is resumed with the key it names, so that its final record
    is signed as its start said it would be (nothing is written before this check)."""
    wanted = trace.started.signed_by
    if not wanted or (signer is not None and signer.key_id == wanted):
        return
    given = "no key" if signer is None else f"key {signer.key_id}"
    raise ConfigError(
        f"this run was started to be signed with key {wanted}, and the resume was given "
        f"{given}: resume it with --sign-key and that key's private key file",
        file=trace.path,
    )
