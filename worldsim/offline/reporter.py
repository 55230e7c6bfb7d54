"""The offline reporter: claims about the multiverse, each pointing at the trace."""

from __future__ import annotations

from worldsim.domain.contracts import EXPECTED
from worldsim.world.moves import Claim, ClaimRef, Report
from worldsim.world.views import ReportContext

__all__ = ["OfflineReporter"]


class OfflineReporter:
    """States the extracted probability and grounds it in the heaviest timelines and the forks."""

    name = "reporter"
    phase = "report"

    async def report(self, ctx: ReportContext) -> Report:
        claims: list[Claim] = []
        heaviest = sorted(ctx.timelines, key=lambda t: (-t.mass, t.id))[:3]
        for tl in heaviest:
            forced = f" (forced p_yes {tl.forced_p_yes:.3f})" if tl.forced_p_yes is not None else ""
            if tl.settlement == EXPECTED:
                # the offline governance ends a timeline when its question resolves, keeping
                # the outcome as a distribution: settled at that value
                outcome = "resolved before the deadline" + forced
            elif tl.settlement != "unresolved":
                outcome = f"settled {tl.settlement}"
            else:
                outcome = (
                    "reached the deadline unresolved"
                    if tl.status == "deadline"
                    else "ended before the deadline unresolved"
                ) + forced
            claims.append(
                Claim(
                    text=(
                        f"Timeline {tl.id} (path mass {tl.mass:.3f}) {outcome} "
                        f"at tick {tl.end_tick}."
                    ),
                    refs=(ClaimRef(timeline=tl.id, tick=tl.end_tick),),
                )
            )
        for fork in ctx.forks[:5]:
            claims.append(
                Claim(
                    text=(
                        f"At tick {fork['tick']}, {fork['parent']} forked into {fork['child']} on "
                        f"'{fork['hypothesis']}' with probability {fork['probability']:.2f}."
                    ),
                    refs=(ClaimRef(timeline=str(fork["child"]), tick=int(fork["tick"])),),
                )
            )
        head = (
            f"p_yes = {ctx.p_yes:.3f} over {len(ctx.timelines)} timelines."
            if ctx.p_yes is not None
            else f"{len(ctx.timelines)} timelines simulated."
        )
        return Report(summary=f"{ctx.card.question} {head}", claims=tuple(claims))
