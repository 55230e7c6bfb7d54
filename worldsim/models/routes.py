"""Route names, per-role routes and the settings (base URL, key) a route reads from its environment.

A route is ``offline`` or ``provider/model``; the model part may itself contain ``/``
(``openrouter/meta-llama/llama-3.1-8b``). Provider ``acme-ai`` reads ``ACME_AI_API_KEY`` and
``ACME_AI_BASE_URL`` from the process environment first, then from a ``.env`` file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from worldsim.domain.errors import ConfigError

__all__ = [
    "LOCAL_PROVIDERS",
    "OFFLINE",
    "OPENAI_BASE_URL",
    "Route",
    "RouteSettings",
    "RouteTable",
    "env_prefix",
    "parse_dotenv",
    "parse_role_route",
    "parse_route",
    "resolve_settings",
]

OFFLINE = "offline"
OPENAI_BASE_URL = "https://api.openai.com/v1"
LOCAL_PROVIDERS = frozenset(
    {"vllm", "ollama", "llamacpp", "llama-cpp", "lmstudio", "local", "sglang"}
)
"""Providers that usually run on the user's machine and may need no key."""

_PLACEHOLDER_KEY = "not-needed"
_PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class Route:
    """A parsed route name: ``offline`` or ``provider/model``."""

    provider: str
    model: str = ""

    @property
    def name(self) -> str:
        return OFFLINE if self.is_offline else f"{self.provider}/{self.model}"

    @property
    def is_offline(self) -> bool:
        return self.provider == OFFLINE

    def __str__(self) -> str:
        return self.name


def parse_route(text: str, *, field: str = "route") -> Route:
    """Parse ``offline`` or ``provider/model``; raise `ConfigError` naming ``field`` otherwise."""
    name = text.strip()
    if name == OFFLINE:
        return Route(OFFLINE)
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model.strip("/"):
        raise ConfigError(
            f"invalid route {text!r}: expected 'offline' or 'provider/model' "
            "(for example 'openai/gpt-4o-mini' or 'vllm/meta-llama/Llama-3.1-8B-Instruct')",
            field=field,
        )
    provider = provider.lower()
    if provider == OFFLINE:
        raise ConfigError(f"invalid route {text!r}: 'offline' takes no model name", field=field)
    if not _PROVIDER_RE.match(provider):
        raise ConfigError(
            f"invalid provider {provider!r} in route {text!r}: use letters, digits, '-' or '_'",
            field=field,
        )
    if any(ch.isspace() for ch in model):
        raise ConfigError(f"invalid model name {model!r} in route {text!r}", field=field)
    return Route(provider, model)


def parse_role_route(text: str) -> tuple[str, Route]:
    """Parse a ``ROLE=ROUTE`` flag value (``--role-model governance=openai/gpt-4o``)."""
    role, sep, route = text.partition("=")
    role = role.strip()
    if not sep or not role or not route.strip():
        raise ConfigError(
            f"invalid role route {text!r}: expected ROLE=ROUTE, e.g. 'actor=openai/gpt-4o-mini'",
            field="--role-model",
        )
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", role):
        raise ConfigError(f"invalid role name {role!r} in {text!r}", field="--role-model")
    return role, parse_route(route, field=f"--role-model {role}")


@dataclass(frozen=True, slots=True)
class RouteTable:
    """Which route serves each role: a default plus per-role overrides."""

    default: Route = field(default_factory=lambda: Route(OFFLINE))
    by_role: Mapping[str, Route] = field(default_factory=dict)

    @classmethod
    def from_flags(cls, model: str | None = None, role_models: Iterable[str] = ()) -> RouteTable:
        """Build from ``--model ROUTE`` and repeated ``--role-model ROLE=ROUTE`` values."""
        default = parse_route(model, field="--model") if model else Route(OFFLINE)
        by_role: dict[str, Route] = {}
        for item in role_models:
            role, route = parse_role_route(item)
            if role in by_role and by_role[role] != route:
                raise ConfigError(
                    f"role {role!r} given two routes: {by_role[role]} and {route}",
                    field="--role-model",
                )
            by_role[role] = route
        return cls(default, by_role)

    def for_role(self, role: str) -> Route:
        return self.by_role.get(role, self.default)

    def routes(self) -> frozenset[Route]:
        """Every distinct route in the table (one limiter and one client each)."""
        return frozenset({self.default, *self.by_role.values()})


@dataclass(frozen=True, slots=True)
class RouteSettings:
    """Where and how to reach one route. ``repr`` never shows the key."""

    route: Route
    base_url: str
    api_key: str = field(repr=False)

    @property
    def secret_key(self) -> str | None:
        """The key, unless it is the placeholder sent to a local server without one: what
        server text is redacted of."""
        return None if self.api_key == _PLACEHOLDER_KEY else self.api_key

    @property
    def base_url_host(self) -> str:
        """Host (and port) of the base URL: what the trace records instead of the full URL."""
        return urlsplit(self.base_url).netloc.rpartition("@")[2]


def env_prefix(provider: str) -> str:
    """``acme-ai`` → ``ACME_AI``: the prefix of a provider's environment variables."""
    return provider.upper().replace("-", "_")


_QUOTED = re.compile(r"""(['"])((?:\\.|(?!\1)[^\\])*)\1\s*(?:#.*)?""")
"""A quoted ``.env`` value, then an optional comment (as python-dotenv reads it)."""
_ESCAPES: dict[str, dict[str, str]] = {
    '"': {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n"}
    | {"r": "\r", "t": "\t", "v": "\v"},
    "'": {"\\": "\\", "'": "'"},
}


def _unquoted(quote: str, body: str) -> str:
    """A quoted value's text, its escapes read (``\\n``, ``\\"`` and so on in double quotes,
    ``\\'`` and ``\\\\`` in single), as python-dotenv reads them."""
    escapes = _ESCAPES[quote]
    return re.sub(r"\\(.)", lambda m: escapes.get(m[1], m[0]), body)


def parse_dotenv(text: str) -> dict[str, str]:
    """Parse ``.env`` text: ``KEY=value`` lines, optional ``export``, quotes and ``#`` comments
    (after a quoted value too: ``KEY="value"  # note``)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            continue
        value = value.strip()
        quoted = _QUOTED.fullmatch(value)
        if quoted is not None:
            value = _unquoted(quoted[1], quoted[2])
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0].rstrip()
        values[key] = value
    return values


def _dotenv(path: Path) -> dict[str, str]:
    try:
        return parse_dotenv(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read .env file: {exc}", file=path) from None


def resolve_settings(
    route: Route | str,
    *,
    environ: Mapping[str, str] | None = None,
    dotenv: Path | str | None = Path(".env"),
) -> RouteSettings:
    """Find a route's base URL and key in ``environ`` (default: the process environment), then
    in the ``dotenv`` file. Raise `ConfigError` naming the missing variable."""
    r = parse_route(route) if isinstance(route, str) else route
    if r.is_offline:
        raise ConfigError("the offline route needs no settings", field="route")
    env = os.environ if environ is None else environ
    file_values = _dotenv(Path(dotenv)) if dotenv is not None else {}
    prefix = env_prefix(r.provider)

    def lookup(name: str) -> str | None:
        value = env.get(name) or file_values.get(name)
        return value.strip() if value and value.strip() else None

    base_url = lookup(f"{prefix}_BASE_URL")
    if base_url is None:
        if r.provider != "openai":
            raise ConfigError(
                f"route {r.name} needs a base URL: set {prefix}_BASE_URL in the environment "
                "or in .env",
                field=f"{prefix}_BASE_URL",
            )
        base_url = OPENAI_BASE_URL
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{prefix}_BASE_URL must be an http(s) URL, got {base_url!r}",
            field=f"{prefix}_BASE_URL",
        )
    api_key = lookup(f"{prefix}_API_KEY")
    if api_key is None:
        if r.provider in LOCAL_PROVIDERS or parts.hostname in ("127.0.0.1", "localhost", "::1"):
            api_key = _PLACEHOLDER_KEY
        else:
            raise ConfigError(
                f"route {r.name} needs a key: set {prefix}_API_KEY in the environment or in .env",
                field=f"{prefix}_API_KEY",
            )
    return RouteSettings(r, base_url.rstrip("/"), api_key)
