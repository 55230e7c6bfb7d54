"""The builder's model calls: a prompt role of phase ``build`` asked once, and the build log
that records every call and decision.

A build log is JSON Lines beside its output (``graph.json`` → ``graph.build.jsonl``): a
``build_started`` line (worldsim version, what is built, the roles with their prompt versions
and routes, the gates), one ``llm_call`` line per model call (the call record a model route
keeps — prompt, reply, usage, cost, redacted like a trace's — or, for the offline model, the
role, route, prompt version and the output), one line per decision, and ``build_completed``.
It is written whole when the build ends (or fails), through a temporary file, so it is never
half-written, and together with what the build made: both are written, or neither. Calls go
through the response cache like a run's, so a build run again asks nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig
from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest, ToolHandler
from worldsim.domain.errors import ConfigError, ModelError
from worldsim.domain.files import write_files
from worldsim.domain.version import __version__, git_revision
from worldsim.gateway.tools import ToolSpec
from worldsim.roles.prompts import load_prompt_role
from worldsim.sim.session import open_models
from worldsim.world.views import BuildContext, RoleView

__all__ = ["BuildLog", "ask", "run_build"]

Out = TypeVar("Out", bound=BaseModel)
T = TypeVar("T")
MAX_TOOL_ROUNDS = 8
"""Rounds of tool calls a build role may make before it answers."""


@dataclass
class BuildLog:
    """Every call and decision of one build, written as JSON Lines at the end."""

    path: Path
    lines: list[dict[str, Any]] = field(default_factory=list)

    def add(self, type_: str, **data: Any) -> None:
        self.lines.append({"type": type_, **data})

    def start(self, what: str, roles: Mapping[str, tuple[str, str]], **data: Any) -> None:
        self.add(
            "build_started",
            what=what,
            worldsim_version=__version__,
            git_revision=git_revision(),
            roles={name: {"prompt_version": v, "route": r} for name, (v, r) in roles.items()},
            **data,
        )

    @property
    def worth_keeping(self) -> bool:
        """Whether the build got as far as a model call (a build refused before any, on bad
        input, leaves no log)."""
        return any(line["type"] in ("llm_call", "build_completed") for line in self.lines)

    def text(self) -> bytes:
        return "".join(
            json.dumps(line, sort_keys=True, default=str) + "\n" for line in self.lines
        ).encode()

    def write(self) -> None:
        write_files({self.path: self.text()})


def _no_outputs(result: object) -> Mapping[Path, bytes]:
    return {}


async def run_build(
    models: ModelConfig,
    roles: Sequence[str],
    log: BuildLog,
    body: Callable[[Mapping[str, Model]], Awaitable[T]],
    outputs: Callable[[T], Mapping[Path, bytes]] = _no_outputs,
) -> T:
    """Open the models of ``models`` (cache and pool, as a run does), run ``body`` with each of
    ``roles``' model, and write what it built (``outputs`` of its result) together with
    ``log``, all or none. A build that fails writes ``log`` alone if it got as far as a model
    call (a model error that ends it is logged, with its failed call)."""
    async with open_models(models) as source:
        try:
            result = await body({name: source.for_role(name) for name in roles})
        except BaseException as exc:
            if isinstance(exc, ModelError):
                if exc.call:
                    log.add("llm_call", **{**exc.call, "failed": True})
                log.add("build_failed", error=str(exc)[:2000])
            if log.worth_keeping:
                log.write()
            raise
    files = dict(outputs(result))
    if log.worth_keeping:
        files[log.path] = log.text()
    write_files(files)
    return result


def role_version(name: str) -> str:
    return load_prompt_role(name).version


async def ask(
    model: Model,
    role_name: str,
    output: type[Out],
    card: Card | None,
    variables: Mapping[str, Any],
    log: BuildLog,
    *,
    seed: int = 0,
    index: int = 0,
    tools: Sequence[ToolSpec] = (),
    tool_handler: ToolHandler | None = None,
) -> Out:
    """Ask the prompt role ``role_name`` (phase ``build``, output ``output``) once; the call
    goes into ``log``. ``index`` tells rounds apart (it is part of the cache key); ``tools``
    with their ``tool_handler`` are offered to a model route (the offline rules ignore them)."""
    role = load_prompt_role(role_name)
    if role.meta.phase != "build" or role.meta.output != output.__name__:
        raise ConfigError(
            f"role '{role_name}' is a {role.meta.phase} role answering {role.meta.output}; "
            f"this step needs a build role answering {output.__name__}",
            file=role.path,
            field="role",
        )
    system, user = role.render(**variables)
    request = ModelRequest(
        messages=(ChatMessage("system", system), ChatMessage("user", user)),
        view=RoleView(context=BuildContext(card=card), variables=variables),
        output_type=output,
        site=CallSite(role=role_name, agent=role_name, index=index),
        prompt_version=role.version,
        temperature=role.meta.temperature,
        seed=seed,
        max_tokens=role.meta.max_tokens,
        tools=tuple(spec.openai() for spec in tools),
        tool_handler=tool_handler,
        max_tool_rounds=MAX_TOOL_ROUNDS,
    )
    response = await model.request(request)
    call = dict(response.call) or {
        "role": role_name,
        "route": model.route,
        "prompt_version": role.version,
        "output": response.output.model_dump(mode="json"),
    }
    log.add("llm_call", **{**call, "round": index})
    if not isinstance(response.output, output):
        raise ConfigError(
            f"{model.route}: role '{role_name}' answered {type(response.output).__name__}",
            field="route",
        )
    return response.output
