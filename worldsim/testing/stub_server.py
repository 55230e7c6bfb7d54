"""`StubServer`: an OpenAI-compatible Chat Completions server on 127.0.0.1 for tests.

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) from a script or with
content invented to fit the requested JSON schema, and injects latency and faults on demand:
429 with ``Retry-After``, 500, timeouts, malformed JSON content, truncated replies, and the
llama-cpp-python refusal of ``json_schema`` response formats. Faults are drawn from a seeded
RNG in arrival order, or forced per request with ``fault_sequence``. It records every request
(path, headers, body) and the most requests it ever served at once.

A request with ``stream: true`` is answered as server-sent events (a chunked body on a connection
kept open), a few characters a chunk:
``chunk_delay_s`` makes the stream trickle like a slow local model, and ``stall_after_chunks``
makes it stop sending mid-way and hold the connection, like a server that hangs.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
from pydantic import BaseModel

from worldsim.models.routes import RouteSettings, parse_route
from worldsim.testing._fake import fake_value
from worldsim.testing.stub_wire import (
    Fault,
    Faults,
    RecordedRequest,
    Script,
    StubReply,
    UsageFn,
    completion_json,
    error_body,
    forced_function,
    requested_schema,
    stream_chunks,
    worst_case_usage,
)

__all__ = ["Fault", "Faults", "RecordedRequest", "StubReply", "StubServer", "worst_case_usage"]


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[RecordedRequest] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0


@dataclass(eq=False)
class StubServer:
    """An OpenAI-compatible server in a background thread, bound to a free port on 127.0.0.1.

    Use as a context manager (``with`` or ``async with``); `base_url` ends in ``/v1``.

    Args:
        script: ``(request JSON) -> reply`` giving the content (or a `StubReply` to answer
            with any status); without it, content is
            invented to fit the request's JSON schema (from ``response_format`` or from a
            schema in the prompt), or ``{}``.
        latency_s: added to every answer.
        jitter_s: up to this much more, a fraction of it fixed by the request's body and
            ``jitter_seed`` (the same request waits alike on a server with the same seed, and
            differently under another), so that answers arrive in another order.
        faults: fault rates and behaviours.
        fault_sequence: faults forced on the first requests, in order (``None``: no fault);
            later requests draw from ``faults``.
        seed: seeds fault draws and invented content.
        resolved_model: the ``model`` field of replies (default: the requested model with a
            dated suffix, as providers resolve aliases).
        usage: the token usage each reply reports (default: a quarter of the characters of
            the prompt's messages and of the reply).
        over_report: a server that over-bills: the replies to requests numbered from
            ``over_report_from`` on report this many input and this many output tokens
            (``None``: the usage above), far more than any request could cost.
        over_report_from: the number (from 0, in arrival order) of the first such request.
        chunk_chars: characters of content per streamed chunk.
        chunk_delay_s: pause before each streamed chunk.
        stall_after_chunks: a stream sends this many chunks, then nothing more (the connection
            stays open until the client gives up or the server stops); ``None``: no stall.
        stall_first: stall only the first this many streamed requests (``None``: every one).
        context_size: reported by ``GET /v1/models`` as llama.cpp does (``meta.n_ctx_train``).
        capacity: a provider's concurrency limit: a request that arrives while this many are
            being handled is answered 429 with ``faults.retry_after`` (``None``: no limit).
        capacity_requests: the limit holds for the first this many requests, then lifts
            (``None``: for all of them), so a client can be seen to recover.
        content_by_request: seed invented content by the request's body instead of by its
            arrival number, so that an answer depends on the request alone: not on the order
            concurrent requests arrive in, nor on what the server answered before (the same
            request is answered alike by a fresh server, as a deterministic model would).
        hold_after: answer the first this many requests; later ones wait, unanswered (and
            counted in flight), until `release` is called; when the server stops first, their
            connections are closed without an answer (a provider that stops answering, at a
            point of a run a test chooses rather than after a time); ``None``: no hold.
    """

    script: Script | None = None
    _: KW_ONLY
    latency_s: float = 0.0
    jitter_s: float = 0.0
    jitter_seed: int = 0
    faults: Faults = field(default_factory=Faults)
    fault_sequence: Sequence[Fault | None] = ()
    seed: int = 0
    resolved_model: str | None = None
    usage: UsageFn | None = None
    over_report: int | None = None
    over_report_from: int = 0
    chunk_chars: int = 4
    chunk_delay_s: float = 0.0
    stall_after_chunks: int | None = None
    stall_first: int | None = None
    context_size: int | None = None
    capacity: int | None = None
    capacity_requests: int | None = None
    content_by_request: bool = False
    hold_after: int | None = None

    def __post_init__(self) -> None:
        self.fault_sequence = tuple(self.fault_sequence)
        self.chunk_chars = max(1, self.chunk_chars)
        self._streams = 0
        self._stopping = threading.Event()
        self._released = threading.Event()
        self._rng = random.Random(self.seed)
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> StubServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        handler = type("_BoundHandler", (_Handler,), {"stub": self})
        httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # stalled streams and held requests let go
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def release(self) -> None:
        """Answer the requests held by ``hold_after``, and every later one (for good: a
        restarted server does not hold again)."""
        self._released.set()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> StubServer:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # -- what tests read -------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens (or last listened) on."""
        if self._port is None:
            raise RuntimeError("the stub server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def settings(self, route: str = "stub/test-model", api_key: str = "stub-key") -> RouteSettings:
        """Route settings pointing at this server."""
        return RouteSettings(parse_route(route), self.base_url, api_key)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def request_count(self) -> int:
        with self._state.lock:
            return len(self._state.requests)

    @property
    def fault_counts(self) -> Counter[str]:
        with self._state.lock:
            return Counter(self._state.faults)

    @property
    def max_concurrency(self) -> int:
        """The most requests the server was handling at the same moment."""
        with self._state.lock:
            return self._state.max_in_flight

    # -- serving ---------------------------------------------------------------------------

    def jitter(self, body: bytes) -> float:
        """The extra wait of a request with this body (see ``jitter_s``)."""
        if self.jitter_s <= 0:
            return 0.0
        digest = hashlib.sha256(self.jitter_seed.to_bytes(8, "big") + body).digest()
        return self.jitter_s * int.from_bytes(digest[:8], "big") / 2**64

    def _admit(
        self, path: str, headers: Mapping[str, str], body: dict[str, Any], connection: str = ""
    ) -> tuple[RecordedRequest, Fault | None]:
        """Record a request and draw its fault (applied, and counted, only if it fits)."""
        with self._state.lock:
            number = len(self._state.requests)
            if number < len(self.fault_sequence):
                fault = self.fault_sequence[number]
            else:
                fault = self.faults.draw(self._rng.random())
            if self._over_capacity(number):
                fault = "rate_limit"
            record = RecordedRequest(number, path, dict(headers), body, None, connection)
            self._state.requests.append(record)
            self._state.in_flight += 1
            self._state.max_in_flight = max(self._state.max_in_flight, self._state.in_flight)
            return record, fault

    def _hold(self, number: int) -> bool:
        """Wait, unanswered, while request ``number`` is past ``hold_after`` and not released;
        whether to answer it (not when the server stopped while it was held)."""
        if self.hold_after is None or number < self.hold_after:
            return True
        while not self._released.is_set():
            if self._stopping.is_set():
                return False
            self._released.wait(0.05)
        return True

    def _over_capacity(self, number: int) -> bool:
        if self.capacity is None or self._state.in_flight < self.capacity:
            return False
        return self.capacity_requests is None or number < self.capacity_requests

    def _applied(self, seen: RecordedRequest, fault: Fault) -> None:
        with self._state.lock:
            self._state.faults[fault] += 1
            self._state.requests[seen.number] = replace(seen, fault=fault)

    def _release(self) -> None:
        with self._state.lock:
            self._state.in_flight -= 1

    def _answer(
        self, seen: RecordedRequest, fault: Fault | None
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        body = dict(seen.body)
        # a gateway throttles and fails before it looks at the request
        if fault == "rate_limit":
            self._applied(seen, fault)
            headers = {"Retry-After": self.faults.retry_after}
            if self.faults.retry_after_ms is not None:
                headers["retry-after-ms"] = self.faults.retry_after_ms
            return 429, headers, error_body("Rate limit reached, slow down", "rate_limit_exceeded")
        if fault == "server_error":
            self._applied(seen, fault)
            return 500, {}, error_body("The server had an error while processing", "server_error")
        refused = self.faults.refusal(body)
        if refused is not None:
            return refused[0], {}, refused[1]
        if fault == "timeout":
            self._applied(seen, fault)
            time.sleep(self.faults.timeout_sleep_s)
        content = self._content(body, seen.number)
        if isinstance(content, StubReply):
            return content.status, dict(content.headers), dict(content.body)
        finish = "stop"
        if fault == "malformed":
            self._applied(seen, fault)
            content = content[: max(1, len(content) - 2)] + ',"'
        elif fault == "truncated":
            self._applied(seen, fault)
            content, finish = content[: max(1, len(content) // 2)], "length"
        completion = self._completion(body, content, finish, seen.number)
        forced = forced_function(body)
        if forced is not None:
            call = {
                "id": f"call_stub{seen.number:06d}",
                "type": "function",
                "function": {"name": forced, "arguments": content},
            }
            choice = completion["choices"][0]
            choice["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice["finish_reason"] = "tool_calls" if finish == "stop" else finish
        return 200, {}, completion

    def _content(self, body: Mapping[str, Any], number: int) -> str | StubReply:
        if self.script is not None:
            reply = self.script(dict(body))
            if isinstance(reply, StubReply):
                return reply
            if isinstance(reply, BaseModel):
                return reply.model_dump_json()
            return reply if isinstance(reply, str) else json.dumps(reply)
        schema = requested_schema(body)
        if schema is None:
            return "{}"
        rng = random.Random(f"{self.seed}:{self._content_key(body, number)}")
        return json.dumps(fake_value(schema, rng))

    def _content_key(self, body: Mapping[str, Any], number: int) -> str:
        if not self.content_by_request:
            return str(number)
        sent = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        return hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()

    def _completion(
        self, body: Mapping[str, Any], content: str, finish: str, number: int
    ) -> dict[str, Any]:
        if self.over_report is not None and number >= self.over_report_from:
            tokens = (self.over_report, self.over_report)
        elif self.usage is not None:
            tokens = self.usage(body, content)
        else:
            prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
            tokens = (max(1, prompt_chars // 4), max(1, len(content) // 4))
        model = self.resolved_model or f"{body.get('model', 'stub-model')}-2026-01-01"
        return completion_json(content, finish, number, self.seed, model, tokens)

    def _stalls(self) -> bool:
        """Whether the next stream stalls (counting streams as they start)."""
        with self._state.lock:
            self._streams += 1
            number = self._streams
        if self.stall_after_chunks is None:
            return False
        return self.stall_first is None or number <= self.stall_first


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default of 5 resets connections under a burst of clients

    def handleerror_body(self, request: Any, client_address: Any) -> None:
        """Clients that drop a connection (timeouts, shutdown) are expected; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    stub: StubServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] not in ("/v1/models", "/models"):
            self._send(404, {}, error_body(f"no route {self.path}", "not_found"))
            return
        meta = {"n_ctx_train": self.stub.context_size} if self.stub.context_size else {}
        model = {"id": "stub-model", "object": "model", "owned_by": "stub", "meta": meta}
        self._send(200, {}, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {}, error_body(f"no route {path}", "not_found"))
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, {}, error_body("request body is not JSON", "invalid_request_error"))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        host, port = self.client_address[:2]
        seen, fault = self.stub._admit(path, headers, body, f"{host}:{port}")
        if not self.stub._hold(seen.number):  # the server stopped holding it: never answered
            self.stub._release()
            self.close_connection = True
            return
        try:
            delay = self.stub.latency_s + self.stub.jitter(raw)
            if delay > 0:
                time.sleep(delay)
            status, reply_headers, payload = self.stub._answer(seen, fault)
        finally:
            # the request stops counting as in flight before its answer is sent: once the
            # client has read it, it may send the next one at once, and that one must not be
            # counted beside this one
            self.stub._release()
        if status == 200 and body.get("stream"):
            self._stream(stream_chunks(body, payload, self.stub.chunk_chars))
        else:
            self._send(status, reply_headers, payload)

    def _stream(self, lines: list[str]) -> None:
        """Send ``lines`` as server-sent events in a chunked body, trickling or stalling as the
        stub says; a stream sent whole keeps its connection open for the next request, as a
        real server's does."""
        stub = self.stub
        stall = stub.stall_after_chunks if stub._stalls() else None
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for number, line in enumerate([*lines, "[DONE]"]):
                if stall is not None and number >= stall:
                    self.close_connection = True
                    stub._stopping.wait(60.0)
                    return
                if stub.chunk_delay_s > 0 and stub._stopping.wait(stub.chunk_delay_s):
                    self.close_connection = True
                    return
                event = f"data: {line}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, status: int, headers: Mapping[str, str], payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
