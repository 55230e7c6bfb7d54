"""One self-contained HTML page: a Jinja2 template, the viewer's CSS and script inlined, and the
data embedded as one JSON blob the script reads.

The data is never markup. It goes into ``<script type="application/json">`` with ``<``, ``>``,
``&`` and the line separators U+2028/U+2029 written as JSON escapes, so no string from a trace
(``</script>`` in a model's reply, say) can end the element or start another; the script puts
strings into the document with ``textContent`` only. A Content-Security-Policy meta tag forbids
every network fetch: the page works from disk, mailed, or offline.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from worldsim.domain.files import write_files
from worldsim.domain.version import __version__

__all__ = ["CSP", "PAGE_KINDS", "embed_json", "render_page", "write_page"]

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
"""No fetch, no frame, no form, no remote image: inline script and style only."""

PAGE_KINDS = ("trace", "compare", "study", "studies")
"""Each kind is a template ``<kind>.html.j2`` and a script ``<kind>.js`` (after ``common.js``)."""

#: Each character that could end the script element or the line, and its JSON escape (none
#: of which holds such a character, so the order they are replaced in does not matter).
_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def embed_json(data: Any) -> str:
    """``data`` as compact JSON that is safe inside a ``<script>`` element (see the module doc).

    Non-finite floats become ``null``: the page's ``JSON.parse`` would refuse ``NaN``.
    """
    try:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # a non-finite float somewhere (a trace holds none): the walk
        if "Out of range float" not in str(exc):
            raise
        text = json.dumps(_finite(data), separators=(",", ":"), ensure_ascii=False)
    # one replace per character: each a scan in C, where one translate of the text is a
    # lookup per character (a large page's data is tens of megabytes)
    for char, escape in _ESCAPES:
        text = text.replace(char, escape)
    return text


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@cache
def _asset(name: str) -> str:
    return (resources.files("worldsim.view") / "templates" / name).read_text(encoding="utf-8")


@cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("worldsim.view", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render_page(kind: str, data: dict[str, Any], *, title: str) -> str:
    """The HTML text of a page of ``kind`` (one of :data:`PAGE_KINDS`) showing ``data``."""
    if kind not in PAGE_KINDS:
        raise ValueError(f"unknown page kind {kind!r}")
    from markupsafe import Markup

    template = _environment().get_template(f"{kind}.html.j2")
    return str(
        template.render(
            title=title,
            csp=CSP,
            version=__version__,
            style=Markup(_asset("viewer.css")),
            script=Markup(_asset("common.js") + "\n" + _asset(f"{kind}.js")),
            data=Markup(embed_json(data)),
        )
    )


def write_page(path: str | Path, html: str) -> Path:
    """Write the page atomically (a reader never sees half a file)."""
    target = Path(path)
    write_files({target: html.encode("utf-8")})
    return target
