"""Prompt roles: Markdown files with YAML front matter and a Jinja2 body (DESIGN §3).

A prompt role's *prompt version* is the first 12 hex digits of the SHA-256 of its file; every
model call records it. Files come from a project-local ``agents/`` folder first, then the bundled
ones, so a project can override a built-in prompt by name.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jinja2
import jinja2.meta
import yaml
from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from worldsim.domain.errors import ConfigError, RoleError
from worldsim.domain.files import first_error
from worldsim.domain.outputs import OUTPUTS, PHASE_OUTPUTS, TEMPLATE_NAMES
from worldsim.domain.resources import data_dirs
from worldsim.domain.values import FrozenModel
from worldsim.gateway.tools import GATEWAY_TOOLS
from worldsim.models.routes import parse_route

__all__ = [
    "ROLE_NAME",
    "PromptFrontMatter",
    "PromptRole",
    "known_prompt_roles",
    "load_prompt_file",
    "load_prompt_role",
]

ROLE_NAME = r"^[a-z][a-z0-9]*([-_][a-z0-9]+)*$"
"""Role names are what users write: lower-case words joined by ``-`` or ``_``."""

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # prompts are plain text, not HTML
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


class PromptFrontMatter(FrozenModel):
    name: str = Field(pattern=ROLE_NAME)
    phase: Literal["init", "tick", "review", "report", "direct", "build", "news"]
    output: str = Field(description="one of the documented output schemas")
    tools: tuple[str, ...] = ()
    route: str | None = Field(None, description="default route; --model applies when absent")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(1200, ge=16, le=32_000)
    description: str = ""

    @field_validator("output")
    @classmethod
    def _known_output(cls, output: str, info: ValidationInfo) -> str:
        if output not in OUTPUTS:
            raise ValueError(f"unknown output '{output}' (known: {', '.join(OUTPUTS)})")
        phase = info.data.get("phase")
        if phase is not None and output not in PHASE_OUTPUTS[phase]:
            allowed = ", ".join(PHASE_OUTPUTS[phase])
            raise ValueError(f"output '{output}' cannot run in phase '{phase}' (takes: {allowed})")
        return output

    @field_validator("route")
    @classmethod
    def _a_route(cls, route: str | None) -> str | None:
        if route is not None:
            try:
                parse_route(route)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return route

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        names = sorted(spec.name for spec in GATEWAY_TOOLS)
        for tool in tools:
            if tool not in names:
                raise ValueError(f"unknown tool '{tool}' (known: {', '.join(names)})")
        return tools


@dataclass(frozen=True, slots=True)
class PromptRole:
    """A parsed prompt role file: its front matter, template and version."""

    path: Path
    meta: PromptFrontMatter
    template: jinja2.Template
    version: str

    @property
    def name(self) -> str:
        return self.meta.name

    def render(self, **context: Any) -> tuple[str, str]:
        """Render the body; a line ``---user---`` splits the system from the user message."""
        try:
            text = self.template.render(**context)
        except jinja2.TemplateError as exc:
            raise RoleError(f"cannot render prompt: {exc}", file=self.path) from None
        system, sep, user = text.partition("---user---")
        if not sep:
            return "", text.strip()
        return system.strip(), user.strip()


def load_prompt_file(path: Path) -> PromptRole:
    """Parse one prompt role file; a bad file is a one-line RoleError naming it and the field."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise RoleError(f"cannot read prompt role: {exc.strerror}", file=path) from None
    return _parse(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _parse(path: Path, mtime_ns: int, size: int) -> PromptRole:
    raw = path.read_bytes()
    try:  # a byte-order mark and Windows line ends are read as a plain UTF-8 file's
        text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise RoleError(f"not UTF-8 text (byte {exc.start}): save it as UTF-8", file=path) from None
    if not text.startswith("---\n"):
        raise RoleError("prompt role must start with YAML front matter ('---')", file=path)
    head, sep, body = text[4:].partition("\n---\n")
    if not sep:
        raise RoleError("front matter is not closed by '---'", file=path)
    try:
        data = yaml.safe_load(head) or {}
        meta = PromptFrontMatter.model_validate(data)
    except yaml.YAMLError as exc:
        raise RoleError(f"malformed front matter: {exc}", file=path) from None
    except ValidationError as exc:
        field, message = first_error(exc)
        raise RoleError(message, file=path, field=field) from None
    if meta.name != path.stem:
        raise RoleError(
            f"front matter name '{meta.name}' differs from the file name", file=path, field="name"
        )
    body_line = head.count("\n") + 3  # the file's line before the body's first
    try:
        parsed = _ENV.parse(body)
    except jinja2.TemplateSyntaxError as exc:
        line = None if exc.lineno is None else exc.lineno + body_line
        raise RoleError(f"template error: {exc.message}", file=path, line=line) from None
    _check_names(path, meta.output, parsed, body_line)
    template = _ENV.from_string(parsed)
    version = hashlib.sha256(raw).hexdigest()[:12]
    return PromptRole(path=path, meta=meta, template=template, version=version)


def _check_names(path: Path, output: str, parsed: jinja2.nodes.Template, body_line: int) -> None:
    """Refuse a template that uses a name its output's view lacks (`TEMPLATE_NAMES`)."""
    sees = TEMPLATE_NAMES.get(output)
    if sees is None:  # rendered on every route, the offline one included: a run shows it
        return
    unknown = jinja2.meta.find_undeclared_variables(parsed) - sees
    if not unknown:
        return
    name = min(unknown)
    line = min((n.lineno for n in parsed.find_all(jinja2.nodes.Name) if n.name == name), default=0)
    close = difflib.get_close_matches(name, sees, n=1)
    hint = f" ('{close[0]}'?)" if close else ""
    raise RoleError(
        f"the template uses '{name}'{hint}, which the {output} view lacks "
        f"(it holds {', '.join(sorted(sees))})",
        file=path,
        line=line + body_line if line else None,
    )


def known_prompt_roles() -> dict[str, tuple[Path, bool]]:
    """Prompt role files by name, each with whether it is bundled with worldsim.

    A project-local ``agents/`` folder (in the current directory) overrides bundled files.
    """
    project = (Path.cwd() / "agents").resolve()
    folders = data_dirs("agents")
    bundled = {folder: folder != project or len(folders) == 1 for folder in folders}
    found: dict[str, tuple[Path, bool]] = {}
    for folder in reversed(folders):
        for path in sorted(folder.glob("*.md")):
            if path.name.lower() != "readme.md":
                found[path.stem] = (path, bundled[folder])
    return found


def load_prompt_role(name: str) -> PromptRole:
    files = known_prompt_roles()
    if name not in files:
        raise RoleError(
            f"no prompt role '{name}' (known: {', '.join(sorted(files)) or 'none'})", field="role"
        )
    return load_prompt_file(files[name][0])
