"""``worldsim replay`` and ``worldsim verify``: reading a trace back, with no model call."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worldsim.cli._app import (
    ExpectHeadOption,
    PublicKeyOption,
    app,
    err_console,
    escape,
    out_console,
    trace_checks,
)
from worldsim.cli.lineage import LINEAGE_TYPES, Lineage
from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ConfigError, TraceError

if TYPE_CHECKING:
    from worldsim.trace.reader import TraceLine
    from worldsim.trace.replay import TickStep
    from worldsim.trace.verify import Verification
    from worldsim.world.outcome import ExtractionData

__all__: list[str] = []


@app.command()
def replay(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Trace file (JSONL).")],
    tick: Annotated[int | None, typer.Option(metavar="K", help="Only this tick.")] = None,
    timeline: Annotated[
        str | None, typer.Option(metavar="ID", help="Only this timeline id (e.g. t0.1).")
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON lines: one per timeline-tick, then the report and audit, then the check.",
        ),
    ] = False,
) -> None:
    """Rebuild a run tick by tick from its trace alone, with no model call.

    Prints in simulated order (tick, then timeline), then the report's claims and the audit
    vector, and ends by extracting p_yes again and comparing it with the recorded one. The
    trace is checked as `verify` checks it: a trace `verify` refuses exits 1 naming its bad line
    and prints nothing else; one cut off (a torn line, no terminal record, a failed run) is
    replayed as far as it goes and exits 3.
    """
    from worldsim.trace.replay import TickStep
    from worldsim.trace.verify import Verifying

    steps: list[TickStep] = []
    seen_ticks: set[int] = set()
    seen_timelines: set[str] = set()

    def rebuilt(step: TickStep) -> None:
        seen_ticks.add(step.tick)
        seen_timelines.add(step.timeline)
        if (tick is None or step.tick == tick) and (timeline is None or step.timeline == timeline):
            steps.append(step)

    seen = _Seen()
    reading = Verifying(trace, on_step=rebuilt)
    for line in reading:
        seen.note(line)
        if line.tl is not None and line.type in _TIMELINE_TYPES:
            seen_timelines.add(line.tl)
    result = reading.result
    _torn_note(result.torn_line)
    if seen.direct:
        _print_extraction(result, json_out, direct=True)
    else:
        if timeline is not None and timeline not in seen_timelines:
            known = ", ".join(sorted(seen_timelines, key=lineage)) or "none"
            raise ConfigError(f"no timeline {timeline} in this trace (it has: {known})", file=trace)
        if tick is not None and tick not in seen_ticks:
            span = f"{min(seen_ticks)}..{max(seen_ticks)}" if seen_ticks else "none"
            raise ConfigError(f"no tick {tick} in this trace (its ticks: {span})", file=trace)
        seen.lineage.show(tick, timeline, json_out)
        _print_run(seen, steps, result, json_out, whole=tick is None and timeline is None)
    if not result.complete:
        err_console.print(f"note: {escape(str(trace))} holds no result: {result.why_incomplete}")
        raise typer.Exit(3)


def _print_run(
    seen: "_Seen",
    steps: "list[TickStep]",
    result: "Verification",
    json_out: bool,
    *,
    whole: bool,
) -> None:
    """The replayed ticks in simulated order (tick by tick, and within a tick the timelines in
    lineage order), the report and audit when the whole run was asked for, and the
    extraction computed again."""
    steps.sort(key=lambda step: (step.tick, lineage(step.timeline)))
    if not json_out:
        for iv in seen.interventions:
            done = "applied" if iv.applied else f"not applied: {iv.reason}"
            out_console.print(
                f"intervention {escape(iv.id)} ({iv.kind}) at {iv.at}, tick {iv.tick}: "
                f"{escape(iv.title or '')} — {done}",
                highlight=False,
            )
    for step in steps:
        if json_out:
            sys.stdout.write(json.dumps(step.as_json()) + "\n")
        else:
            _print_step(step)
    if whole:
        _print_outcome(seen.report, seen.audit, json_out)
    _print_extraction(result, json_out, direct=False)


def _forecast(extraction: "ExtractionData") -> str:
    """``p_yes 0.42`` for a binary card, the option distribution for a multiple-choice one."""
    if extraction.p_options is not None:
        return "p_options " + ", ".join(f"{k}={v!r}" for k, v in extraction.p_options.items())
    return f"p_yes {extraction.p_yes!r}"


def _no_extraction(why: str, json_out: bool) -> None:
    msg = f"{why}; nothing to compare"
    if json_out:
        sys.stdout.write(json.dumps({"extraction": None, "note": msg}) + "\n")
    else:
        out_console.print(msg)


_TIMELINE_TYPES = frozenset({"particle", "timeline_started", "timeline_ended"})
"""Records that name a timeline of the trace (a continued run's particle ended before its cut
runs no tick in it)."""


class _Seen:
    """What ``replay`` prints of the effective lines besides the ticks, noted as they pass:
    whether the run is a direct forecast, the interventions, and the last report and audit."""

    def __init__(self) -> None:
        self.direct = False
        self.interventions: list[Any] = []
        self.report: Any = None
        self.audit: Any = None
        self.lineage = Lineage()

    def note(self, line: "TraceLine") -> None:
        kind = line.type
        if kind in LINEAGE_TYPES:
            self.lineage.note(kind, line.tl, line.data)
        if kind == "run_started":
            self.direct = line.data.kind == "direct"
        elif kind == "intervention":
            self.interventions.append(line.data)
        elif kind == "report":
            self.report = line.data
        elif kind == "audit":
            self.audit = line.data


def _torn_note(torn_line: int | None) -> None:
    if torn_line is not None:
        err_console.print(f"note: torn final line {torn_line} ignored (the run was cut off)")


def _print_outcome(report: Any, audit: Any, json_out: bool) -> None:
    """The run's report (summary and claims with their references) and its audit vector."""
    if json_out:
        payload = {
            "report": report.model_dump(mode="json") if report is not None else None,
            "audit": audit.model_dump(mode="json") if audit is not None else None,
        }
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    if report is not None:
        out_console.rule("report", style="cyan")
        out_console.print(escape(report.summary), highlight=False)
        for claim in report.claims:
            refs = "; ".join(
                ", ".join(f"{k} {v}" for k, v in ref.model_dump(exclude_none=True).items())
                for ref in claim.refs
            )
            out_console.print(
                f"  • {escape(claim.text)}  [dim]({escape(refs)})[/]", highlight=False
            )
    if audit is not None:
        out_console.rule("audit", style="cyan")
        for key, value in audit.model_dump(mode="json").items():
            if isinstance(value, list):
                value = "; ".join(str(v) for v in value) or "none"
            elif isinstance(value, float):
                value = f"{value:.12g}"  # 12 significant digits: no float noise
            out_console.print(f"  {key}: {escape(str(value))}", highlight=False)


def _print_extraction(result: "Verification", json_out: bool, *, direct: bool) -> None:
    """The extraction computed again beside the recorded one; a direct trace has no world to
    rebuild, so its extraction is computed again from the model's recorded reply."""
    recorded, replayed = result.recorded, result.recomputed
    if recorded is None or replayed is None:
        why = (
            "direct trace with no extraction (the model call failed)"
            if direct
            else "no extraction recorded (the run did not finish)"
        )
        _no_extraction(why, json_out)
        return
    if json_out:
        line: dict[str, Any] = {
            "rule": recorded.rule,
            "recorded_p_yes": recorded.p_yes,
            "replayed_p_yes": replayed.p_yes,
        }
        if not direct:
            line["recorded_p_options"] = recorded.p_options
            line["replayed_p_options"] = replayed.p_options
        sys.stdout.write(json.dumps({"extraction": {**line, "matches": True}}) + "\n")
    elif direct:
        out_console.print(
            f"direct trace: p_yes {replayed.p_yes!r} from the recorded reply under "
            f"{recorded.rule} matches the recorded {recorded.p_yes!r}"
        )
    else:
        out_console.print(
            f"re-extracted {_forecast(replayed)} under {recorded.rule}: matches the recorded "
            f"{_forecast(recorded)}",
            highlight=False,
        )


def _print_step(step: "TickStep") -> None:
    out_console.rule(
        f"{step.timeline} · tick {step.tick} · {step.date or ''} · mass {step.mass:.4f}",
        style="cyan",
    )
    for obs in step.observations:
        out_console.print(f"  event  {obs.id}: {obs.title}", highlight=False)
    for name, value in step.variables_set:
        out_console.print(f"  set    {name} = {value!r}", highlight=False)
    accepted = {(r.agent, r.index) for r in step.review.accepted} if step.review else set()
    for p in step.proposals:
        mark = "✓" if (p.agent, p.index) in accepted else "✗"
        out_console.print(f"  {mark} {p.agent}#{p.index}: {p.summary}", highlight=False)
    if step.review is not None:
        for r in step.review.rejected:
            out_console.print(f"    rejected {r.agent}#{r.index}: {r.reason}", highlight=False)
        out_console.print(
            f"  review: {step.review.decision} — {step.review.reason}", highlight=False
        )
    for endpoint, old, new in step.ledger_changes:
        out_console.print(f"  ledger {endpoint}: {old} → {new}", highlight=False)
    for f in step.forks:
        out_console.print(
            f"  fork → {f.child} on '{f.candidate.hypothesis}' p={f.candidate.probability:.3f} "
            f"mass {f.mass_child:.4f}",
            highlight=False,
        )
    for r in step.rejected:
        outcome = (
            ""
            if r.came_true is None
            else f" (sampled: {'came true' if r.came_true else 'did not'})"
        )
        out_console.print(f"  fork rejected: {r.reason}{outcome}", highlight=False)
    pressure = ", ".join(f"{k}={v:+.3f}" for k, v in sorted(step.state.pressure.items()))
    out_console.print(
        f"  pressure {pressure} · status {step.status} · digest {step.digest[:12]}", highlight=False
    )


@app.command()
def verify(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Trace file (JSONL).")],
    canonical: Annotated[bool, typer.Option(help="Print the canonical hash.")] = False,
    expect_head: ExpectHeadOption = None,
    public_key: PublicKeyOption = None,
    parent: Annotated[
        Path | None,
        typer.Option(
            metavar="PARENT",
            help="For a continued run: verify PARENT too, through the same checks, and require "
            "its head, canonical hash, date, cut tick and particles at the cut to be the ones "
            "TRACE records.",
        ),
    ] = None,
) -> None:
    """Check a trace's hash chain and invariants; exit 0 when sound and complete.

    The trace is checked in one streamed pass, holding only each timeline's open tick
    (with --canonical, also the content the hash covers, to sort it).

    Prints, on standard error, its verdict, the trace's head (the SHA-256 of its last complete
    line, which pins every line before it) and whether its final record is signed; standard
    output holds only the canonical hash (--canonical). Exit 1 names the first bad line, a head
    other than the expected one, or a signature the given public key does not confirm; exit 3
    means sound but cut off (a torn final line or no terminal record: the run can be resumed).
    """
    from worldsim.trace.verify import verify_trace

    expected, key = trace_checks(expect_head, public_key)
    try:
        result = verify_trace(trace, expect_head=expected, public_key=key, canonical=canonical)
    except TraceError as exc:
        err_console.print(f"[bold red]FAIL[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    if parent is not None:
        from worldsim.cli.lineage import check_parent

        try:
            check_parent(trace, parent)
        except TraceError as exc:
            err_console.print(f"[bold red]FAIL[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1) from None
    if canonical and result.canonical is not None:
        out_console.print(result.canonical, highlight=False)
    status = "[bold green]OK[/]" if result.exit_code == 0 else "[bold yellow]INCOMPLETE[/]"
    err_console.print(f"{status} {escape(str(trace))}: " + "; ".join(_findings(result)))
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _findings(result: "Verification") -> list[str]:
    """The parts of verify's one line, in the order a reader checks them."""
    if result.head is None:
        return [f"{result.note}: the run was cut off in its first record"]
    plural = "" if result.records == 1 else "s"
    lines = [f"{result.records} record{plural}, chain intact"]
    if result.mass_sum is not None:
        lines.append(f"mass sums to {result.mass_sum:.12f}")
    if result.recorded is not None:
        lines.append(f"extraction recomputed ({_forecast(result.recorded)})")
    if result.unterminated:
        lines.append(
            f"final line {result.torn_line} is a whole record without its newline, not counted"
        )
    elif result.torn_line is not None:
        lines.append(f"torn final line {result.torn_line} ignored")
    if not result.complete:
        lines.append(f"incomplete: ends with {result.terminal or 'no terminal record'}")
    lines.append(f"head {result.head}")
    if result.signature_checked:
        lines.append(f"signature by key {result.key_id} checked")
    elif result.terminal is not None:
        lines.append(
            f"signed by key {result.key_id} (not checked)" if result.key_id else "unsigned"
        )
    return lines
