"""A loopback server speaking Azure AI Document Intelligence's analyze wire format (REST API
version 2024-11-30), for the real ``azure-ai-documentintelligence`` SDK:

* ``POST {endpoint}/documentintelligence/documentModels/{modelId}:analyze?api-version=...``
  with the file as the request body; answers ``202 Accepted`` with an ``Operation-Location``
  header and no body;
* ``GET {endpoint}/documentintelligence/documentModels/{modelId}/analyzeResults/{resultId}``
  answers ``{"status": "running", ...}`` ``running_polls`` times, then ``{"status":
  "succeeded", ..., "analyzeResult": {...}}`` (or ``"failed"`` with an error);
* the key goes in ``Ocp-Apim-Subscription-Key``; a wrong one gets ``401`` with the service's
  error shape ``{"error": {"code", "message"}}``.

``server.analyze(data, model_id)`` makes the ``analyzeResult`` for the uploaded bytes; tests
set it. ``server.script`` / ``server.default`` script the POST replies as for the other
loopback servers.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.servers.fake_apis import FakeServer, Recorded

API_VERSION = "2024-11-30"
_ANALYZE = re.compile(r"^/documentintelligence/documentModels/([^/:]+):analyze$")
_RESULT = re.compile(r"^/documentintelligence/documentModels/([^/]+)/analyzeResults/([^/]+)$")
_TIME = "2025-01-01T00:00:00Z"


class FakeDocumentIntelligence(FakeServer):
    """The analyze operation and its polling (see the module docstring)."""

    key = "di-test-key"

    def __init__(self) -> None:
        super().__init__()
        self.analyze: Callable[[bytes, str], dict[str, Any]] = lambda data, model_id: {"content": "", "pages": []}
        self.running_polls = 1
        self.fail_with: dict[str, str] | None = None  # {"code", "message"}: the operation fails
        self.jobs: dict[str, dict[str, Any]] = {}
        self._jobs_lock = threading.Lock()

    def _error(self, status: int) -> dict[str, Any]:
        code = {401: "401", 404: "NotFound", 429: "429", 500: "InternalServerError"}.get(status, "InvalidRequest")
        message = {401: "Access denied due to invalid subscription key or wrong API endpoint."}.get(status, "error")
        return {"error": {"code": code, "message": message}}

    def _authorised(self, h: BaseHTTPRequestHandler) -> bool:
        if h.headers.get("Ocp-Apim-Subscription-Key") == self.key:
            return True
        self._send(h, 401, self._error(401), {})
        return False

    def _handle(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        raw: bytes = getattr(h, "raw_body", b"")
        url = urlsplit(h.path)
        with self._lock:
            self.requests.append(Recorded("POST", h.path, {k.lower(): v for k, v in h.headers.items()}, raw))
        m = _ANALYZE.match(url.path)
        if m is None or parse_qs(url.query).get("api-version") != [API_VERSION]:
            self._send(h, 404, self._error(404), {})
            return
        if not self._authorised(h):
            return
        reply = self._next_reply()
        if reply.status != 200:
            self._send(h, reply.status, self._error(reply.status), reply.headers)
            return
        model_id = m.group(1)
        rid = str(uuid.uuid4())
        with self._jobs_lock:
            self.jobs[rid] = {"model": model_id, "result": self.analyze(raw, model_id), "polls": 0}
        location = f"{self.url}/documentintelligence/documentModels/{model_id}/analyzeResults/{rid}?api-version={API_VERSION}"
        h.send_response(202)
        h.send_header("Operation-Location", location)
        h.send_header("apim-request-id", rid)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def _handle_get(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        with self._lock:
            self.requests.append(Recorded("GET", h.path, {k.lower(): v for k, v in h.headers.items()}, None))
        m = _RESULT.match(url.path)
        job = self.jobs.get(m.group(2)) if m else None
        if job is None:
            self._send(h, 404, self._error(404), {})
            return
        if not self._authorised(h):
            return
        with self._jobs_lock:
            job["polls"] += 1
            polls = job["polls"]
        status: dict[str, Any] = {"createdDateTime": _TIME, "lastUpdatedDateTime": _TIME}
        if polls <= self.running_polls:
            status["status"] = "running"
        elif self.fail_with is not None:
            status.update(status="failed", error=dict(self.fail_with))
        else:
            result = {"apiVersion": API_VERSION, "modelId": job["model"], "stringIndexType": "textElements",
                      "contentFormat": "text", **job["result"]}
            status.update(status="succeeded", analyzeResult=result)
        self._send(h, 200, status, {})


@pytest.fixture()
def fake_docintel() -> Iterator[FakeDocumentIntelligence]:
    """A running Document Intelligence server for one test; its ``url`` is the endpoint."""
    s = FakeDocumentIntelligence().start()
    try:
        yield s
    finally:
        s.stop()
