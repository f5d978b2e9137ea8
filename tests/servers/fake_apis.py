"""Loopback HTTP servers speaking the OpenAI and Voyage wire formats.

Why: remote clients are tested with their *real* SDKs (openai, voyageai), so everything from
request building to retries, timeouts and response parsing runs for real; only the far end
is local. Each server listens on 127.0.0.1 on a random free port in a daemon thread.

Scriptable behaviour: ``server.script`` is a queue of :class:`Reply` consumed one per
request; when it is empty ``server.default`` answers. Examples::

    fake_openai.script = [Reply(status=429), Reply()]    # 429 then success
    fake_openai.default = Reply(status=500)             # 500 until retries are exhausted
    fake_openai.script = [Reply(delay=2.0)]              # slower than the client timeout
    fake_openai.script = [Reply(content="{not json")]    # malformed JSON from the model
    fake_openai.responder = lambda body: "42 [1]"        # chat reply from the request
    fake_openai.on("Extract the names", lambda body: '{"entities": ["Paris"]}')  # per prompt
    fake_openai.script = [Reply(refusal="I can't help with that.")]      # a refusal
    fake_openai.script = [Reply(usage=(1000, 20))]       # exact token counts

``on(pattern, fn)`` answers requests whose system message matches ``pattern`` (a regex) with
``fn(body)``; the first matching rule wins, else ``responder`` answers. One server can so
stand in for every LLM stage of a route (NER, classifier, synthesis) in one query.

``server.requests`` records every request (path, headers, JSON body) so a test can count
calls (cache hits) and check what was sent.

Other test folders use the fixtures by importing them::

    from tests.servers.fake_apis import Reply, fake_openai  # noqa: F401
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np
import pytest

_WORD = re.compile(r"\w+")


@dataclass
class Reply:
    """One scripted answer. ``status`` != 200 sends the API's error shape; ``delay`` sleeps
    first (to provoke client timeouts); ``content`` overrides the chat message text."""

    status: int = 200
    delay: float = 0.0
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None  # chat: message.refusal set, content null
    finish_reason: str = "stop"  # chat: e.g. "content_filter", "length"
    usage: tuple[int, int] | None = None  # chat: (prompt, completion) tokens instead of word counts


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def bow_vector(text: str, dim: int) -> np.ndarray:
    """A deterministic bag-of-words vector: texts sharing words are similar (cosine), so
    tests can check ranking, not just shapes."""
    v = np.zeros(dim, dtype=np.float32)
    for w in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.md5(w.encode(), usedforsecurity=False).digest()[:4], "little")
        v[h % dim] += 1.0 if (h >> 31) & 1 == 0 else -1.0
    n = float(np.linalg.norm(v))
    if n == 0:
        v[0] = 1.0
        return v
    return v / n


def _encode(vec: np.ndarray, fmt: str | None) -> Any:
    if fmt == "base64":
        return base64.b64encode(vec.astype(np.float32).tobytes()).decode()
    return [float(x) for x in vec]


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def system_text(body: dict[str, Any]) -> str:
    """The system message of a chat request ("" when there is none)."""
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "system")


class FakeServer:
    """Base: threading HTTP server, script queue, request log."""

    error_shape = "openai"

    def __init__(self, port: int = 0) -> None:
        self.script: list[Reply] = []
        self.default = Reply()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                self.raw_body = raw  # for servers whose requests are not JSON (file uploads)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                server._handle(self, body)

            def do_GET(self) -> None:
                server._handle_get(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.default = Reply()
            self.requests.clear()

    def count(self, suffix: str = "") -> int:
        return sum(1 for r in self.requests if r.path.split("?")[0].endswith(suffix))

    # ------------------------------------------------------------------ plumbing
    def _next_reply(self) -> Reply:
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    def _handle(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        with self._lock:
            self.requests.append(Recorded("POST", h.path, {k.lower(): v for k, v in h.headers.items()}, body))
        reply = self._next_reply()
        if reply.delay and self._stop.wait(reply.delay):
            return
        try:
            if reply.status != 200:
                self._send(h, reply.status, self._error(reply.status), reply.headers)
                return
            path = h.path.split("?")[0]
            payload = self.route(path, body if isinstance(body, dict) else {}, reply)
            if payload is None:
                self._send(h, 404, self._error(404), {})
            else:
                self._send(h, 200, payload, reply.headers)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            return

    def _handle_get(self, h: BaseHTTPRequestHandler) -> None:
        """GET requests: none of the JSON APIs above has one (polling servers override it)."""
        self._send(h, 404, self._error(404), {})

    def _error(self, status: int) -> dict[str, Any]:
        msg = {429: "rate limit exceeded", 500: "internal error", 503: "overloaded", 404: "not found"}.get(
            status, "error"
        )
        if self.error_shape == "voyage":
            return {"detail": msg}
        return {"error": {"message": msg, "type": "server_error" if status >= 500 else "invalid_request_error", "code": None}}

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def route(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        raise NotImplementedError


class FakeOpenAI(FakeServer):
    """``POST .../chat/completions`` and ``POST .../embeddings`` (also under Azure's
    ``/openai/deployments/<name>/...?api-version=``)."""

    error_shape = "openai"
    default_dims = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.responder: Callable[[dict[str, Any]], str] = lambda body: "OK"
        self.rules: list[tuple[re.Pattern[str], Callable[[dict[str, Any]], str]]] = []

    def reset(self) -> None:
        super().reset()
        self.responder = lambda body: "OK"
        self.rules = []

    def on(self, pattern: str, fn: Callable[[dict[str, Any]], str]) -> None:
        """Answer chat requests whose system message matches ``pattern`` with ``fn(body)``."""
        self.rules.append((re.compile(pattern, re.I), fn))

    def chat_count(self, pattern: str) -> int:
        """Chat requests whose system message matches ``pattern``."""
        rx = re.compile(pattern, re.I)
        return sum(
            1 for r in self.requests
            if r.path.split("?")[0].endswith("/chat/completions") and isinstance(r.body, dict)
            and rx.search(system_text(r.body))
        )

    def _answer(self, body: dict[str, Any]) -> str:
        system = system_text(body)
        for rx, fn in self.rules:
            if rx.search(system):
                return fn(body)
        return self.responder(body)

    def route(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        if path.endswith("/chat/completions"):
            if reply.refusal is not None:
                text: str | None = None
                message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": reply.refusal}
            else:
                text = reply.content if reply.content is not None else self._answer(body)
                message = {"role": "assistant", "content": text}
            prompt = sum(_words(str(m.get("content", ""))) for m in body.get("messages", []))
            completion = _words(text or reply.refusal or "")
            if reply.usage is not None:
                prompt, completion = reply.usage
            return {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
            }
        if path.endswith("/embeddings"):
            inputs = body.get("input", [])
            if isinstance(inputs, str):
                inputs = [inputs]
            model = body.get("model", "")
            dim = int(body.get("dimensions") or self.default_dims.get(model, 256))
            fmt = body.get("encoding_format")
            tokens = sum(_words(t) for t in inputs)
            return {
                "object": "list",
                "model": model,
                "data": [
                    {"object": "embedding", "index": i, "embedding": _encode(bow_vector(t, dim), fmt)}
                    for i, t in enumerate(inputs)
                ],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        return None


class FakeVoyage(FakeServer):
    """``POST /v1/embeddings``, ``/v1/contextualizedembeddings`` and ``/v1/rerank``."""

    error_shape = "voyage"
    context_weight = 0.5  # how much of the whole document goes into each chunk's vector

    def route(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        dim = int(body.get("output_dimension") or 1024)
        fmt = body.get("encoding_format")
        model = body.get("model", "")
        if path.endswith("/contextualizedembeddings"):
            docs: list[list[str]] = body.get("inputs", [])
            data = []
            tokens = 0
            for i, chunks in enumerate(docs):
                whole = bow_vector(" ".join(chunks), dim)
                rows = []
                for j, c in enumerate(chunks):
                    v = bow_vector(c, dim) + self.context_weight * whole
                    v = v / (np.linalg.norm(v) or 1.0)
                    rows.append({"object": "embedding", "index": j, "embedding": _encode(v, fmt)})
                    tokens += _words(c)
                data.append({"object": "list", "index": i, "data": rows})
            return {"object": "list", "data": data, "model": model, "usage": {"total_tokens": tokens}}
        if path.endswith("/embeddings"):
            texts = body.get("input", [])
            if isinstance(texts, str):
                texts = [texts]
            return {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": _encode(bow_vector(t, dim), fmt)}
                    for i, t in enumerate(texts)
                ],
                "model": model,
                "usage": {"total_tokens": sum(_words(t) for t in texts)},
            }
        if path.endswith("/rerank"):
            query = set(_WORD.findall(str(body.get("query", "")).lower()))
            docs2: list[str] = body.get("documents", [])
            scored = []
            for i, d in enumerate(docs2):
                words = set(_WORD.findall(d.lower()))
                scored.append((len(query & words) / (len(query) or 1), i))
            scored.sort(key=lambda t: (-t[0], t[1]))
            top_k = body.get("top_k")
            if top_k:
                scored = scored[: int(top_k)]
            tokens = _words(str(body.get("query", ""))) * len(docs2) + sum(_words(d) for d in docs2)
            return {
                "object": "list",
                "data": [{"relevance_score": s, "index": i} for s, i in scored],
                "model": model,
                "usage": {"total_tokens": tokens},
            }
        return None


@pytest.fixture()
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running OpenAI-compatible server for one test; base URL ``fake_openai.url + "/v1"``
    (Azure: ``fake_openai.url`` as the endpoint). Stopped after the test."""
    s = FakeOpenAI().start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture()
def fake_voyage() -> Iterator[FakeVoyage]:
    """A running Voyage-compatible server for one test; base URL ``fake_voyage.url + "/v1"``."""
    s = FakeVoyage().start()
    try:
        yield s
    finally:
        s.stop()


def main(argv: list[str] | None = None) -> None:
    """Run the loopback servers in the foreground, the OpenAI one answering graphroute's
    prompts with :mod:`tests.servers.fake_model`, e.g. for a ``graphroute bench`` run::

        python -m tests.servers.fake_apis --openai-port 8801 --voyage-port 8802
        GRAPHROUTE_LLM=openai OPENAI_API_KEY=sk-fake \\
          GRAPHROUTE_LLM_PARAMS='{"base_url": "http://127.0.0.1:8801/v1"}' graphroute bench ...
    """
    import argparse
    import signal

    from tests.servers.fake_model import install

    ap = argparse.ArgumentParser(prog="python -m tests.servers.fake_apis", description=main.__doc__)
    ap.add_argument("--openai-port", type=int, default=8801)
    ap.add_argument("--voyage-port", type=int, default=0, help="0: no Voyage server")
    args = ap.parse_args(argv)
    servers: list[FakeServer] = []
    openai_server = FakeOpenAI(args.openai_port)
    install(openai_server)
    servers.append(openai_server.start())
    print(f"openai-compatible: {openai_server.url}/v1", flush=True)
    if args.voyage_port:
        voyage = FakeVoyage(args.voyage_port).start()
        servers.append(voyage)
        print(f"voyage: {voyage.url}/v1", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for srv in servers:
            srv.stop()


if __name__ == "__main__":
    main()
