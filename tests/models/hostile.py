"""A server that answers exactly the bytes a test gives it: the stream shapes and replies a
hostile or broken OpenAI-compatible server sends, which `StubServer` never does."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from worldsim.models.routes import RouteSettings, parse_route

FORECAST = {"p_yes": 0.3, "stance": "neutral", "rationale": "r"}


@dataclass(frozen=True)
class Raw:
    """One HTTP answer: status, headers and body, sent as they are."""

    body: bytes
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


def sse(*events: object, done: bool = True) -> Raw:
    """A streamed answer: each event as a ``data:`` line, then ``[DONE]`` unless not."""
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return Raw("".join(lines).encode(), headers=(("Content-Type", "text/event-stream"),))


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """A stream chunk with one choice."""
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "model": "test-model", "choices": [choice], **extra}


USAGE = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


@dataclass
class Hostile:
    """Answers the n-th request with ``answers[n]`` (the last one from then on)."""

    answers: Sequence[Raw]
    count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Hostile:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with owner._lock:
                    raw = owner.answers[min(owner.count, len(owner.answers) - 1)]
                    owner.count += 1
                self.send_response(raw.status)
                for name, value in raw.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw.body)))
                self.end_headers()
                self.wfile.write(raw.body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def settings(self, api_key: str = "sk-hostile-secret-key") -> RouteSettings:
        port = self._httpd.server_address[1]
        return RouteSettings(parse_route("acme/test-model"), f"http://127.0.0.1:{port}/v1", api_key)
