"""The direct baseline: one structured model call per card, no simulated world.

The card (without its evidence list) is rendered into a prompt role of phase ``direct`` (the
bundled ``agents/direct.md``, or any other chosen with ``--role``) and sent as one request for
a `ForecastOutput` (binary cards) or a `ChoiceForecastOutput` (multiple-choice cards, whose
default role is ``direct_choice``). The reply's ``p_yes``, or its option distribution, is the
forecast. The run writes an ordinary hash-chained trace of kind ``direct``::

    run_started → llm_call → extraction → report → audit → run_completed

so ``verify``, ``replay`` and ``score`` read it next to multiverse traces. The extraction rule
``direct/1`` takes ``p_yes`` from the reply unchanged (an option distribution is normalised to
sum to 1); its mass fields describe one path of mass 1 with no unresolved mass. A failed call
ends the trace with ``run_failed`` after the call's ``llm_call`` record, and the error is raised.

On the ``offline`` route the offline model answers from the request's view (the card) with the
card's ``seeds.base_rate`` (0.5 when the card has none; for a multiple-choice card its
``base_rates``, else uniform) and says so in the rationale; since it keeps no call record, the
trace records its reply as an ``offline`` call.
"""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from worldsim.domain.cards import Card, card_hash
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted, ConfigError, ModelError
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.domain.outputs import ChoiceForecastOutput, ForecastOutput
from worldsim.domain.version import __version__, git_revision
from worldsim.models.call import LlmCallData, abandoned_call
from worldsim.models.leakage import LeakageGuard
from worldsim.models.routes import parse_route
from worldsim.roles.prompts import load_prompt_role
from worldsim.sim.plan import trace_name
from worldsim.sim.settlement import Settled
from worldsim.trace.audit import endpoint_problems
from worldsim.trace.records import (
    AuditData,
    ExtractionData,
    ReportData,
    RunCompletedData,
    RunFailedData,
    RunStartedData,
)
from worldsim.trace.signing import Signer
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import prior_of
from worldsim.world.moves import Claim
from worldsim.world.outcome import DIRECT_RULE, direct_extraction, direct_options
from worldsim.world.views import ForecastContext, RoleView

__all__ = [
    "DirectResult",
    "default_direct_role",
    "direct_request",
    "extract_reply",
    "forecast_card",
]

Forecast = ForecastOutput | ChoiceForecastOutput


@dataclass(frozen=True, slots=True)
class DirectResult(Settled):
    """What one direct forecast gave, and where its trace is."""

    model: str
    output: Forecast
    call: dict[str, Any]
    audit: AuditData

    @property
    def cost_usd(self) -> float | None:
        """What the forecast cost: 0 when the cache answered it, ``None`` when unpriced."""
        if self.call.get("cache") == "hit":
            return 0.0
        cost = self.call.get("cost_usd")
        return float(cost) if isinstance(cost, int | float) else None

    def details(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "leakage_warning": self.output.leakage_warning,
            "leakage": self.audit.leakage,
            "cache": self.call.get("cache"),
            "cost_usd": self.cost_usd,
        }


def default_direct_role(card: Card) -> str:
    """The bundled direct role for the card's kind."""
    return "direct" if card.kind == "binary" else "direct_choice"


def _output_type(card: Card) -> type[Forecast]:
    return ForecastOutput if card.kind == "binary" else ChoiceForecastOutput


def direct_request(card: Card, *, seed: int = 0, role_name: str | None = None) -> ModelRequest:
    """The one request of a direct forecast: the prompt role ``role_name`` (phase ``direct``,
    default: the bundled role for the card's kind) for the card, evidence left out, with the
    card as its structured view (the offline model answers from it)."""
    role_name = role_name or default_direct_role(card)
    role = load_prompt_role(role_name)
    wanted = _output_type(card)
    if role.meta.phase != "direct":
        raise ConfigError(
            f"role '{role_name}' runs in phase '{role.meta.phase}', not 'direct' "
            f"(a direct forecast needs output: {wanted.__name__})",
            file=role.path,
            field="role",
        )
    if role.meta.output != wanted.__name__:
        raise ConfigError(
            f"role '{role_name}' answers {role.meta.output}; a direct forecast of a {card.kind} "
            f"card needs output {wanted.__name__}",
            file=role.path,
            field="role",
        )
    system, user = role.render(card=card.model_copy(update={"evidence": None}))
    return ModelRequest(
        messages=(ChatMessage("system", system), ChatMessage("user", user)),
        view=RoleView(context=ForecastContext(card=card)),
        output_type=wanted,
        site=CallSite(role=role_name, agent=role_name),
        prompt_version=role.version,
        temperature=role.meta.temperature,
        seed=seed,
        max_tokens=role.meta.max_tokens,
        check=functools.partial(_reply_problem, card),
    )


def _reply_problem(card: Card, output: BaseModel) -> str | None:
    """What makes a reply that fits its schema no forecast of ``card`` (an outcome id the card
    lacks, say), for the model to repair; ``None`` when it is one."""
    if not isinstance(output, ForecastOutput | ChoiceForecastOutput):
        return None  # not a forecast at all: the caller says so
    try:
        extract_reply(card, output)
    except ValueError as exc:
        return str(exc)
    return None


def _local_call(route: str, request: ModelRequest, response: ModelResponse) -> dict[str, Any]:
    """The call record of a reply from a model that keeps none (the offline model): a direct
    trace always records its one reply, so replay can re-extract it."""
    text = canonical_bytes(response.output.model_dump(mode="json")).decode()
    parsed = parse_route(route)
    call = LlmCallData.for_request(
        request, provider=parsed.provider, requested_model=parsed.name, output_mode="offline"
    )
    call.resolved_model = parsed.name
    call.finish_reason = "stop"
    call.cost_usd = 0.0
    call.reply = text
    return call.model_dump(mode="json")


def extract_reply(card: Card, output: Forecast) -> ExtractionData:
    """The ``direct/1`` extraction of a reply (ValueError if it does not fit the card)."""
    if isinstance(output, ForecastOutput):
        if card.kind != "binary":
            raise ValueError("the reply is a ForecastOutput, but the card is multiple choice")
        return direct_extraction(output.p_yes)
    if card.kind == "binary":
        raise ValueError("the reply is a ChoiceForecastOutput, but the card is binary")
    scored = [ep.id for ep in card.scored_endpoints]
    pairs = [(item.endpoint, item.p) for item in output.probabilities]
    return direct_extraction(None, direct_options(scored, pairs))


def _claims(output: Forecast) -> list[Claim]:
    """Drivers and uncertainties as claims. They cite nothing in a trace (there is no world to
    cite), so the audit marks grounding as not checked."""
    return [
        *(Claim(text=f"Driver: {d}"[:1000]) for d in output.drivers),
        *(Claim(text=f"Uncertainty: {u}"[:1000]) for u in output.uncertainties),
    ]


def _audit(
    card: Card,
    extraction: ExtractionData,
    output: Forecast,
    route: str,
    guard: LeakageGuard | None,
) -> AuditData:
    findings: list[dict[str, Any]] = []
    if guard is not None:
        findings.extend(
            {"kind": "forbidden_string", **f.model_dump(mode="json")} for f in guard.findings
        )
    if output.leakage_warning:
        findings.append({"kind": "model_warning", "route": route})
    leakage = "findings" if findings else ("clean" if guard is not None else "not-checked")
    endpoint_bad = endpoint_problems(card, ())
    return AuditData(
        initialization_valid=True,
        initialization_problems=[],
        endpoint_hygiene=not endpoint_bad,
        endpoint_problems=endpoint_bad,
        mass_sum=extraction.mass_sum,
        mass_conserved=True,
        unresolved_mass=extraction.unresolved_mass,
        extraction_rule=extraction.rule,
        report_grounding="not-checked",
        ungrounded_refs=[],
        leakage=leakage,
        leakage_findings=findings,
        world="none",
        prior=prior_of(card),
    )


async def forecast_card(
    card: Card,
    *,
    model: Model,
    route: str,
    out: str | Path = "traces",
    seed: int = 0,
    overwrite: bool = False,
    fsync: bool = True,
    method: str = "direct",
    guard: LeakageGuard | None = None,
    config: RunConfig | None = None,
    role: str | None = None,
    trace_path: str | Path | None = None,
    signer: Signer | None = None,
) -> DirectResult:
    """Forecast ``card`` with one call to ``model`` and write the trace
    ``<out>/<card>__<method>__s<seed>.jsonl`` (or ``trace_path``).

    ``route`` is the route name recorded in the trace; ``guard`` is the leakage guard wrapped
    around ``model``, if any, whose findings go into the audit; ``config``, the run's settings
    recorded in the trace header (with a ``forecast_date`` in it, the prompt's as-of is that
    date); ``signer``, the key that signs the sealed last record. A role that does not fit the
    card's kind raises `ConfigError` and an existing trace without ``overwrite`` `TraceError`,
    both before the trace is created. The trace's ``run_started`` records the whole card
    (evidence included, as its hash does); only the prompt leaves the evidence out. A failed
    call (`ModelError`, `BudgetExhausted`, `LeakageError`, ...) ends the trace with
    ``run_failed`` and is raised; a cancellation (Ctrl-C, SIGTERM) records the call it cut
    short and leaves the trace cut off, as a run's.
    """
    started = time.perf_counter()
    if config is None:  # called without a run's settings: those of a plain direct run
        config = RunConfig.from_dict(
            {
                "card": card,
                "kind": "direct",
                "seed": seed,
                "method": method,
                "models": {"model": route},
            }
        )
    seen = config.world_card
    request = direct_request(seen, seed=seed, role_name=role)
    role = request.site.role
    path = Path(trace_path) if trace_path else Path(out) / trace_name(config)
    run_id = uuid.uuid4().hex[:16]
    writer = await TraceWriter.create(path, run_id, fsync=fsync, overwrite=overwrite)
    writer.signer = signer
    try:
        await writer.emit(
            "run_started",
            RunStartedData(
                worldsim_version=__version__,
                git_revision=git_revision(),
                card_hash=card_hash(card),
                card=card.public_dict(),
                method=method,
                model=route,
                policy={},
                routes={role: route},
                prompt_versions={role: request.prompt_version},
                seed=seed,
                ticks=0,
                extraction_rule=DIRECT_RULE,
                kind="direct",
                config=config.to_dict(),
                signed_by=signer.key_id if signer is not None else "",
                **config.started_fields(),
            ),
        )
        try:
            response = await model.request(request)
        except (ModelError, BudgetExhausted) as exc:
            if exc.call:
                await _emit_call(writer, exc.call)
            raise
        except anyio.get_cancelled_exc_class() as cancelled:
            sent = abandoned_call(cancelled)  # sent, perhaps paid, then cut short by a stop
            if sent is not None:
                with anyio.CancelScope(shield=True):
                    await _emit_call(writer, sent)
            raise
        record = dict(response.call) or _local_call(route, request, response)
        call = await _emit_call(writer, record)
        output = response.output
        if not isinstance(output, ForecastOutput | ChoiceForecastOutput):
            raise ModelError(
                f"{route}: the reply is a {type(output).__name__}, not a forecast", call=call
            )
        try:
            extraction = extract_reply(card, output)
        except ValueError as exc:
            raise ModelError(f"{route}: {exc}", call=call) from None
        await writer.emit("extraction", extraction)
        await writer.emit(
            "report",
            ReportData(agent="direct", summary=output.rationale, claims=_claims(output)),
        )
        audit = _audit(card, extraction, output, route, guard)
        await writer.emit("audit", audit)
        await writer.emit(
            "run_completed",
            RunCompletedData(timelines=0, forks=0, forks_rejected=0, p_yes=extraction.p_yes),
            durable=True,
        )
        return DirectResult(
            card_id=card.id,
            seed=seed,
            method=method,
            model=route,
            run_id=run_id,
            trace=path,
            output=output,
            call=call,
            wall_s=time.perf_counter() - started,
            extraction=extraction,
            audit=audit,
            head=writer.prev,
        )
    except Exception as exc:
        with anyio.CancelScope(shield=True):
            await writer.emit(
                "run_failed",
                RunFailedData(error=str(exc)[:2000], kind=type(exc).__name__, resumable=False),
                durable=True,
            )
        raise
    finally:
        await writer.aclose()


async def _emit_call(writer: TraceWriter, call: dict[str, Any]) -> dict[str, Any]:
    """Validate a call record and write it as ``llm_call``; returns it as written."""
    try:
        data = LlmCallData.model_validate(call)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        raise ModelError(f"the model returned a malformed call record: {msg}") from None
    await writer.emit("llm_call", data, tl=None, tick=None)
    return data.model_dump(mode="json")
