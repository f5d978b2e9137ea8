"""The HTTP API: a FastAPI app over one :class:`~graphroute.core.engine.GraphRoute`.

Why it looks the way it does:

* **One engine per process.** Models (embedder, spaCy, LLM client) load once and are shared
  by every request; queries run in a bounded thread pool so a slow route never blocks the
  event loop, and a per-request time limit answers 504 instead of hanging the client. The
  limit is a deadline the query itself checks, so a timed-out query stops and frees its
  thread instead of running on behind its 504. The queue in front of the pool is bounded
  too (:class:`QueryQueue`): past it a query is refused at once with a 503 and Retry-After,
  before its body is read, instead of every client of a burst waiting with its body in
  memory.
* **Same semantics as the CLI.** ``POST /query`` returns exactly ``query --json``
  (:meth:`QueryResult.to_public_json`), route problems come back with the message the CLI
  prints, and overrides use the one override syntax of the Python API.
* **Safe by default.** A bearer token is checked when configured (``serve`` refuses to bind
  a non-loopback address without one), bodies are capped (413), route names are names and
  never file paths, server-side index paths are refused unless the operator allowed a root
  folder (checked on real paths, links followed), logs are structured JSON lines with a
  request id and never a secret, ``/health`` tells a caller without the token only that the
  service is up, and error bodies name no server path and echo at most a short prefix of
  the input.

Indexing runs in a background worker (one job at a time, so two uploads never write the same
group concurrently); ``GET /jobs/{id}`` reports its state, progress and final report.
"""

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from graphroute.core.api.constants import DEFAULT_ROUTE
from graphroute.core.api.models import Box, Citation
from graphroute.core.api.values import echo
from graphroute.core.config.overrides import Overrides, overrides_from_mapping
from graphroute.core.config.resolve import load_route
from graphroute.core.config.route import find_route, list_routes
from graphroute.core.config.settings import DEFAULT_MAX_QUESTION_CHARS, Settings
from graphroute.core.errors import (
    GraphRouteError,
    IndexCancelled,
    NotFoundError,
    QueryTimeoutError,
    RouteConfigError,
    StoreError,
    http_status_for,
    message_for,
)
from graphroute.core.index.manage import MAX_GROUP_CHARS, check_group_name
from graphroute.core.index.pipeline import failed_steps, nothing_indexed
from graphroute.core.index.skeleton import PATH_SEP
from graphroute.core.lib.deadline import deadline_in
from graphroute.core.lib.paths import default_cache_dir
from graphroute.core.query.runner import check_question
from graphroute.core.registry import skipped_builtins
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from fastapi import FastAPI
    from graphroute.core.config.resolve import ResolvedRoute
    from graphroute.core.engine import GraphRoute

T = TypeVar("T")

DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_QUERY_THREADS = 4
# requests that may wait for a query thread, per thread, unless --max-queued says how many:
# past them a query is refused at once (503, Retry-After) instead of queueing without end,
# its body held in memory meanwhile (150 queued 900 KB bodies: +160 to +240 MB of server
# memory). 8 a thread lets 32 clients with one query each in flight wait behind the default
# 4 threads, as the 32-client load test does, without a refusal.
DEFAULT_QUEUED_PER_THREAD = 8
BUSY_RETRY_AFTER_S = 2  # the Retry-After of that 503
LOGGER_NAME = "graphroute.server"
# route and profile names: never paths, not even relative ones (no '/', no '.yaml')
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
MAX_JOBS_KEPT = 200
# listings (GET /groups, GET /groups/{group}/documents) answer one page of `limit` items:
# this many when a request names no limit, and never more than the maximum
DEFAULT_PAGE_LIMIT = 100
MAX_PAGE_LIMIT = 1000
# the most entries each of a job report's lists (failed, skipped, warnings, encodings) keeps;
# `omitted` counts the rest, so polling a job over a folder of 100,000 bad files stays small
MAX_REPORT_ITEMS = 100
# /health answers 503 when the store does not answer within this (a prober's timeout is
# typically 5-10 s); the check runs on a thread of its own, never a query thread
HEALTH_TIMEOUT_S = 4.0


# --------------------------------------------------------------------------- configuration


@dataclass
class ServerConfig:
    """What ``graphroute serve`` passes to :func:`create_app` (all optional in tests)."""

    store: str | None = None
    group: str | None = None
    token: str | None = None  # bearer token; None means no auth (loopback only, see serve)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = DEFAULT_TIMEOUT_S
    query_workers: int = DEFAULT_QUERY_THREADS
    # requests that may wait for a query thread while all are busy (None:
    # DEFAULT_QUEUED_PER_THREAD per thread); more are answered 503
    max_queued: int | None = None
    index_roots: list[Path] = field(default_factory=list)  # server-side paths allowed under these
    upload_dir: Path | None = None  # where POST /index documents are written before indexing
    default_route: str = DEFAULT_ROUTE
    preload: bool = False  # run the default route once at startup so the first query is not slow

    def queue_bound(self) -> int:
        """How many requests may wait for a query thread."""
        return DEFAULT_QUEUED_PER_THREAD * max(1, self.query_workers) if self.max_queued is None else max(0, self.max_queued)

    @classmethod
    def from_env(cls, **kwargs: Any) -> "ServerConfig":
        """Defaults from the environment (``GRAPHROUTE_TOKEN``), explicit values win."""
        cfg = cls(**kwargs)
        if cfg.token is None:
            cfg.token = os.environ.get("GRAPHROUTE_TOKEN") or None
        return cfg


# --------------------------------------------------------------------------- API models


class ErrorBody(BaseModel):
    """Every error the API returns, 404, 405 and the request-validation 422 included."""

    error: str = Field(description="machine-readable error code, e.g. `route_config`, `unknown_group`")
    message: str = Field(description="what went wrong and how to fix it (the CLI's wording)")
    request_id: str | None = Field(None, description="the X-Request-ID of the request")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    # the length limit is the engine's (GRAPHROUTE_MAX_QUESTION_CHARS), checked there so an
    # over-long question is a 400 with the same message as on the command line
    question: str = Field(
        min_length=1, description="the question (at most the server's question-length limit)",
        json_schema_extra={"maxLength": DEFAULT_MAX_QUESTION_CHARS},
    )
    route: str | None = Field(None, pattern=NAME_PATTERN, description="a route name (`GET /routes`); the server's default route when omitted")
    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS, description="group (corpus); the server's default when omitted")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description='stage overrides: {"score_gap.threshold": 0.4, "score_gap.enabled": false} '
        'or {"score_gap": {"threshold": 0.4}}',
    )


class EvidenceOut(BaseModel):
    id: str
    text: str
    score: float
    document: str
    section_path: str
    source: str
    kind: str
    page: int | None = None
    boxes: list[Box] = Field(default_factory=list, description="the text's lines on its page, PDF points from the top-left corner")
    char_offset: int | None = None
    char_length: int | None = None


class TraceOut(BaseModel):
    stage: str
    use: str
    kind: str
    enabled: bool
    duration_ms: float
    items_in: int
    items_out: int
    tokens: dict[str, int]
    stats: dict[str, Any]


class QueryResponse(BaseModel):
    """Exactly what ``graphroute query --json`` prints."""

    question: str
    route: str
    group: str
    answer: str
    negative: bool
    citations: list[Citation]
    evidence: list[EvidenceOut]
    trace: list[TraceOut]
    duration_ms: float


class RouteSummary(BaseModel):
    name: str
    description: str
    shipped: bool = Field(description="true for routes shipped with graphroute, false for $GRAPHROUTE_ROUTES ones")


class RouteDetail(BaseModel):
    name: str
    description: str
    yaml: str = Field(description="the fully resolved route YAML, as `graphroute routes show` prints it")
    config: dict[str, Any] = Field(description="the same, as JSON")


class PluginsResponse(BaseModel):
    plugins: list[dict[str, Any]]
    skipped: dict[str, str] = Field(description="built-in plugin modules not loaded, and why")


class IndexDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    title: str = Field(min_length=1, max_length=300, description="document title (a single leading `# heading` in the text takes precedence)")
    text: str = Field(min_length=1, description="plain text or Markdown (headings become sections)")


class IndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS)
    documents: list[IndexDocument] = Field(default_factory=list, max_length=10_000)
    paths: list[str] = Field(
        default_factory=list, max_length=10_000,
        description="server-side files or folders; only under the server's --index-root folders",
    )
    profile: str | None = Field(None, pattern=NAME_PATTERN, description="index profile name")


JobState = Literal["queued", "running", "succeeded", "failed"]


class JobInfo(BaseModel):
    id: str
    state: JobState
    group: str
    created: float = Field(description="unix time")
    started: float | None = None
    finished: float | None = None
    progress: dict[str, Any] = Field(
        default_factory=dict,
        description="`phase` (queued, writing uploads, indexing, done, failed), `inputs`, and the current "
        "indexing `step` with `completed` / `total` items",
    )
    report: dict[str, Any] | None = Field(
        None, description="the index report (`graphroute index --json`), each file named as the client knows it; its "
        f"lists `failed`, `skipped`, `warnings` and `encodings` hold at most {MAX_REPORT_ITEMS} entries each, and "
        "`omitted` (when present) counts the entries past that, per list",
    )
    error: str | None = None


class HealthResponse(BaseModel):
    """Without the server's token only ``status``; with it (or on a server without one) also
    the version, the store backend and its groups."""

    status: Literal["ok"]
    version: str | None = None
    backend: str | None = None
    groups: list[str] | None = Field(
        None, description=f"the store's groups by name, the first {MAX_PAGE_LIMIT:,} (`GET /groups` pages through them all)",
    )
    groups_total: int | None = Field(None, description="how many groups the store holds")


# --------------------------------------------------------------------------- logging


class JsonFormatter(logging.Formatter):
    """One JSON object per line; known secrets are masked wherever they appear."""

    def __init__(self, secrets: Callable[[], list[str]] | None = None) -> None:
        super().__init__()
        self._secrets = secrets or (lambda: [])

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        data.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        text = json.dumps(data, default=str, ensure_ascii=False)
        for secret in self._secrets():
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text


def log_event(logger: logging.Logger, level: int, event: str, *, exc_info: bool = False, **fields: Any) -> None:
    logger.log(level, event, extra={"fields": fields}, exc_info=exc_info)


def configure_logging(secrets: Callable[[], list[str]] | None = None, stream: Any = None) -> logging.Handler:
    """Send ``graphroute.server`` records (and uvicorn's errors) to stderr as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(secrets))
    for name in (LOGGER_NAME, "uvicorn.error"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            if isinstance(h.formatter, JsonFormatter):
                lg.removeHandler(h)
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    return handler


def secrets_of(config: ServerConfig, settings: Settings) -> list[str]:
    return [s for s in (config.token, settings.openai_api_key, settings.voyage_api_key, settings.neo4j_password) if s]


# --------------------------------------------------------------------------- errors


class ApiError(GraphRouteError):
    """An error raised by the HTTP layer itself, with its status, code and message."""

    def __init__(self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = self.http_status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def _error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "bad route, overrides or parameters (message as the CLI prints it)",
        401: "missing or wrong bearer token",
        403: "server-side paths not allowed",
        404: "unknown route, group or job",
        409: "another index run or delete is writing the group",
        413: "request body too large",
        503: "store unavailable, or the server busy (`busy`, with Retry-After)",
        504: "the request took longer than the server's time limit",
    }
    return {c: {"model": ErrorBody, "description": text.get(c, "error")} for c in codes}


# absolute paths: POSIX ones of two or more parts (not a URL's "//host" nor "/query"), and
# Windows drive paths
_POSIX_PATH = re.compile(r"(?<![\w.:/~])~?/(?:[^\s/'\"`:,;()\[\]{}<>|]+/)+([^\s/'\"`:,;()\[\]{}<>|]+)")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\(?:[^\s\\'\"`:,;()\[\]{}<>|]+\\)+([^\s\\'\"`:,;()\[\]{}<>|]+)")


def redact_paths(message: str) -> str:
    """``message`` with every absolute file path cut to its last part (``.../routes/x.yaml:10``
    becomes ``x.yaml:10``): an error body tells a client what went wrong, not where the
    server keeps its files."""
    return _WINDOWS_PATH.sub(r"\1", _POSIX_PATH.sub(r"\1", message))


def validation_message(errors: Any) -> str:
    """FastAPI's validation errors as one message ("body.question: Field required; ..."),
    the first five, without the offending input (pydantic puts the whole of it, up to the
    entire body, into each error)."""
    parts = []
    errors = list(errors)
    for e in errors[:5]:
        where = ".".join(str(x) if isinstance(x, int) else echo(str(x), 40) for x in e.get("loc", ()))
        msg = echo(str(e.get("msg", "")), 300)
        parts.append(f"{where}: {msg}" if where else msg)
    if len(errors) > 5:
        parts.append(f"and {len(errors) - 5} more")
    return "; ".join(parts) or "invalid request"


def json_error_message(error: Any, body: Any) -> str:
    """A body that is not JSON, said with the line and column where parsing stopped
    (FastAPI gives the character offset), without the body itself."""
    loc = tuple(error.get("loc", ()))
    why = str((error.get("ctx") or {}).get("error") or "JSON decode error")
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body if isinstance(body, str) else None
    if len(loc) == 2 and isinstance(loc[1], int) and text is not None:
        before = text[: loc[1]]
        line, column = before.count("\n") + 1, loc[1] - (before.rfind("\n") + 1) + 1
        return f"the body is not valid JSON: {echo(why, 100)} at line {line}, column {column}"
    return f"the body is not valid JSON: {echo(why, 100)}"


def refuse_server_side(base: "ResolvedRoute", ov: Overrides) -> None:
    """A RouteConfigError when a request's overrides set a parameter marked
    :data:`~graphroute.core.api.stage.SERVER_SIDE` on a stage of ``base`` (the route as the
    server resolves it): which client a stage calls, its URL and the environment variable of
    its key are the server's to choose, or a client could have the server send its keys to
    any URL."""
    classes = {rs.spec.key: rs.cls for rs in base.stages()}
    for stage_id, param in ov.params:
        cls = classes.get(stage_id)
        if cls is not None and param in cls.Params.server_side():
            raise RouteConfigError(
                f"`{param}` of stage `{cls.name}` cannot be set in a request: it chooses where the "
                "server connects and which of its environment variables it sends there",
                file=base.config.source, stage=stage_id,
                fix="set it in a route file on the server (a $GRAPHROUTE_ROUTES folder), or the "
                "server's GRAPHROUTE_LLM / GRAPHROUTE_LLM_PARAMS, and pick that route by name",
            )


# --------------------------------------------------------------------------- query queue

# set while a request holds a place in the query queue, so its run_limited takes no second one
_HOLDS_PLACE: ContextVar[bool] = ContextVar("graphroute_holds_query_place", default=False)


class QueryQueue:
    """Admission to the query pool: at most ``threads`` requests running and ``max_queued``
    waiting; the next one is refused with a 503 at once. A request to an endpoint of
    :attr:`endpoints` (a query's, whose body is the large part) takes its place in the
    middleware, before its body is read, and keeps it to its end; any other work sent to the
    pool (``run_limited``) takes one for as long as it runs."""

    def __init__(self, threads: int, max_queued: int) -> None:
        self.threads, self.max_queued = max(1, threads), max(0, max_queued)
        self.admitted = 0
        self.endpoints: set[Callable[..., Any]] = set()
        self._lock = threading.Lock()

    def enter(self) -> bool:
        with self._lock:
            if self.admitted >= self.threads + self.max_queued:
                return False
            self.admitted += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.admitted -= 1

    def busy(self) -> ApiError:
        return ApiError(
            503, "busy",
            f"the server is busy: its query threads ({self.threads}) are all at work and as many requests wait "
            f"for them as it allows (--max-queued {self.max_queued}); retry in {BUSY_RETRY_AFTER_S} s",
            headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
        )


# --------------------------------------------------------------------------- middleware


class RequestGuard:
    """Pure ASGI middleware: request id, body-size limit, one access-log line per request.

    The size limit is enforced on the declared Content-Length *and* on the bytes actually
    received, so a chunked upload cannot slip past it.
    """

    def __init__(
        self, app: Any, *, max_body_bytes: int, logger: logging.Logger, too_large: type[Exception] | None = None,
        queue: QueryQueue | None = None, queued: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.logger = logger
        # FastAPI turns any exception raised while it reads the body into a 400, except
        # HTTPException subclasses: create_app passes one so the client sees the 413.
        self.too_large = too_large
        # a request for which ``queued(scope)`` is true takes a place in ``queue`` before its
        # body is read, or is answered 503 without reading it
        self.queue, self.queued = queue, queued

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        incoming = headers.get("x-request-id", "")
        rid = incoming if _REQUEST_ID_RE.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        t0 = time.perf_counter()
        status = 500
        started = False
        received = 0

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        async def reply(code: int, err: str, msg: str, extra: Mapping[str, str] | None = None) -> None:
            body = json.dumps({"error": err, "message": msg, "request_id": rid}).encode()
            await send_with_id({
                "type": "http.response.start", "status": code,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items())],
            })
            await send({"type": "http.response.body", "body": body})

        too_large = f"request body exceeds the server limit of {self.max_body_bytes} bytes"
        declared = headers.get("content-length")
        queue = self.queue if self.queue is not None and self.queued is not None and self.queued(scope) else None
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await reply(413, "too_large", too_large)
        elif queue is not None and not queue.enter():
            busy = queue.busy()  # the body is never read: the server discards it as it arrives
            await reply(busy.status, busy.code, busy.message, busy.headers)
        else:
            holds = _HOLDS_PLACE.set(queue is not None)
            async def limited_receive() -> Any:
                nonlocal received
                message = await receive()
                if message.get("type") == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.max_body_bytes:
                        if self.too_large is not None:
                            raise self.too_large(too_large)
                        raise ApiError(413, "too_large", too_large)
                return message

            try:
                await self.app(scope, limited_receive, send_with_id)
            except ApiError as exc:  # raised while the body was read, before any response
                await reply(exc.status, exc.code, exc.message, exc.headers)
            except Exception as exc:  # a bug: log it (as JSON), answer 500 without details
                log_event(self.logger, logging.ERROR, "unhandled error", request_id=rid,
                          error=f"{type(exc).__name__}: {exc}", exc_info=True)
                if not started:
                    await reply(500, "internal", f"internal error ({type(exc).__name__}); see the server log for request {rid}")
            finally:
                _HOLDS_PLACE.reset(holds)
                if queue is not None:
                    queue.leave()
        path = scope.get("path", "")
        log_event(
            self.logger, logging.INFO, "request",
            request_id=rid, method=scope.get("method"), path=path, status=status,
            duration_ms=round((time.perf_counter() - t0) * 1000.0, 2),
            client=(scope.get("client") or ("?",))[0],
        )


# --------------------------------------------------------------------------- jobs


@dataclass
class Job:
    id: str
    group: str
    state: JobState = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    error: str | None = None

    def info(self) -> JobInfo:
        return JobInfo(
            id=self.id, state=self.state, group=self.group, created=self.created, started=self.started,
            finished=self.finished, progress=dict(self.progress), report=self.report, error=self.error,
        )


class JobManager:
    """Index jobs, run one at a time by a single worker thread (writes to a group are
    serialised; queries keep being served meanwhile)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphroute-index")
        self._logger = logger
        self.stopping = threading.Event()  # set by shutdown: a running job stops at its next step

    def check_stopping(self) -> None:
        """IndexCancelled once the server is stopping: a running job's progress reports call it,
        so Ctrl+C stops the server within a step of indexing instead of after the whole job.
        The index is left as an interrupted `graphroute index` leaves it: the next run of the
        same files finishes it."""
        if self.stopping.is_set():
            raise IndexCancelled("the server stopped during the job; index the same input again to finish it")

    def submit(self, group: str, work: Callable[[Job], dict[str, Any]], request_id: str) -> Job:
        job = Job(id=uuid.uuid4().hex, group=group, progress={"phase": "queued"})
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > MAX_JOBS_KEPT:
                oldest = next(iter(self._jobs))
                if self._jobs[oldest].state in ("queued", "running"):
                    break
                self._jobs.popitem(last=False)
        self._pool.submit(self._run, job, work, request_id)
        return job

    def _run(self, job: Job, work: Callable[[Job], dict[str, Any]], request_id: str) -> None:
        job.state, job.started = "running", time.time()
        job.progress = {**job.progress, "phase": "indexing"}
        log_event(self._logger, logging.INFO, "job started", job_id=job.id, group=job.group, request_id=request_id)
        try:
            job.report = _jsonable(work(job))
            if nothing_indexed(job.report):  # the runs after which `graphroute index` exits 1
                job.error = f"nothing was indexed: {failed_count(job.report)} input(s) could not be read (see the report's `failed`)"
            elif steps := failed_steps(job.report):
                job.error = f"index step(s) {', '.join(steps)} failed (see the report's `warnings`); the documents were written"
        except Exception as exc:  # the job reports it; the server keeps running
            job.error = redact_paths(f"{type(exc).__name__}: {exc}")
        job.finished = time.time()
        job.progress = {**job.progress, "phase": "failed" if job.error else "done"}
        job.state = "failed" if job.error else "succeeded"  # last: a poller that sees it sees the rest
        if job.error:
            log_event(self._logger, logging.ERROR, "job failed", job_id=job.id, error=job.error, request_id=request_id)
        log_event(
            self._logger, logging.INFO, "job finished", job_id=job.id, state=job.state,
            seconds=round(job.finished - (job.started or job.finished), 3), request_id=request_id,
        )

    def run_write(self, work: Callable[[], T]) -> Future[T]:
        """Run a store write (a delete) on the jobs' worker thread, after the queued jobs."""
        return self._pool.submit(work)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def shutdown(self) -> None:
        self.stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


def public_report(report: dict[str, Any], titles: Mapping[str, str], sources: "SourceNames") -> dict[str, Any]:
    """An index report as a client may see it: each file named as the client knows it (an
    upload of this job by the title it was sent with in ``titles``, any other file as
    ``sources`` names it: relative to its --index-root, or by its name), any other server
    path in a message cut to its last part, and each list (``failed``, ``skipped``,
    ``warnings``, ``encodings``) cut to its first :data:`MAX_REPORT_ITEMS` entries,
    ``omitted`` counting the rest."""

    def name(path: str) -> str:
        return titles[path] if path in titles else sources.source(path)

    def entry(item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "path": name(str(item.get("path", ""))), "reason": redact_paths(str(item.get("reason", "")))}

    lists: dict[str, list[Any]] = {
        "failed": list(report.get("failed", [])), "skipped": list(report.get("skipped", [])),
        "encodings": list(report.get("encodings", {}).items()), "warnings": list(report.get("warnings", [])),
    }
    omitted = {key: len(items) - MAX_REPORT_ITEMS for key, items in lists.items() if len(items) > MAX_REPORT_ITEMS}
    kept = {key: items[:MAX_REPORT_ITEMS] for key, items in lists.items()}
    public = {
        **report,
        "failed": [entry(f) for f in kept["failed"]],
        "skipped": [entry(f) for f in kept["skipped"]],
        "encodings": {name(path): enc for path, enc in kept["encodings"]},
        "warnings": [redact_paths(str(w)) for w in kept["warnings"]],
    }
    if omitted:
        public["omitted"] = omitted
    return public


def failed_count(report: Mapping[str, Any]) -> int:
    """The inputs a (public) job report counts as failed, those past its list included."""
    return len(report.get("failed", [])) + int((report.get("omitted") or {}).get("failed", 0))


def _jsonable(value: Any) -> dict[str, Any]:
    if hasattr(value, "to_json"):
        value = value.to_json()
    elif isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    data = json.loads(json.dumps(value, default=str))
    return data if isinstance(data, dict) else {"result": data}


# --------------------------------------------------------------------------- uploads


def _slug(title: str) -> str:
    """A file name for an uploaded title: readable, unique per title, never a path."""
    base = re.sub(r"[^A-Za-z0-9._ -]+", "", title).strip().replace(" ", "_").strip("._-")[:80] or "document"
    return f"{base}-{hashlib.sha1(title.encode('utf-8')).hexdigest()[:8]}"


def write_uploads(directory: Path, documents: list[IndexDocument]) -> list[Path]:
    """Write uploaded documents as Markdown files (the title in front matter) so they go
    through the same loader as files on disk, headings and tables included; re-uploading a
    title rewrites its file, so the indexer sees a changed document, not a new one."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc in documents:
        p = directory / f"{_slug(doc.title)}.md"
        title = " ".join(doc.title.split())
        # quoted (a JSON string is a YAML double-quoted scalar) so quotes, colons and
        # brackets in the title come back verbatim
        quoted = json.dumps(title, ensure_ascii=False)
        p.write_text(f"---\ntitle: {quoted}\n---\n\n{doc.text.strip()}\n", encoding="utf-8")
        paths.append(p)
    return paths


def _upload_root(config: ServerConfig, store_location: str) -> Path:
    """The folder that holds every group's upload folder for one store."""
    return config.upload_dir or (default_cache_dir() / "uploads" / hashlib.sha1(store_location.encode()).hexdigest()[:12])


def _upload_dir_for(config: ServerConfig, store_location: str, group: str) -> Path:
    """The folder of one group's uploads (its own: the folder name holds a hash of the group)."""
    return _upload_root(config, store_location) / _slug(group)


def remove_uploads(directory: Path, sources: Iterable[str] | None = None) -> None:
    """Delete uploaded text from one group's upload folder ``directory``: the files among
    ``sources`` (deleted documents' sources, as the store records them), or every upload of
    the group with None (the folder goes too). Only the Markdown files :func:`write_uploads`
    puts directly in that folder are touched, never a link nor a file elsewhere (a document
    from an --index-root folder keeps its file)."""
    if directory.is_symlink() or not directory.is_dir():
        return
    folder = Path(os.path.realpath(directory))
    files = folder.glob("*.md") if sources is None else (Path(src.split("#", 1)[0]) for src in sources)
    for f in files:
        if f.suffix == ".md" and f.is_file() and not f.is_symlink() and Path(os.path.realpath(f.parent)) == folder:
            f.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # still holds uploads of other documents
        folder.rmdir()


def upload_title(path: Path) -> str | None:
    """The title an upload was sent with: the front matter :func:`write_uploads` puts on its
    first two lines. None when the file is gone or does not begin that way."""
    try:
        with path.open(encoding="utf-8") as fh:
            first, second = fh.readline(16), fh.readline(4096)
    except (OSError, UnicodeDecodeError):
        return None
    if first.rstrip("\n") != "---" or not second.startswith("title: "):
        return None
    try:
        title = json.loads(second[len("title: "):])
    except ValueError:
        return None
    return title if isinstance(title, str) and title else None


class SourceNames:
    """How the API names the file a document was read from, so that no answer shows a server
    path: a file under an ``--index-root`` folder by its path relative to that folder, an
    upload by the title it was uploaded under, any other file by its name; the ``#n`` of a
    JSON corpus entry is kept. The names the index jobs' reports give files, applied to the
    documents listing and to a query's evidence."""

    def __init__(self, roots: Iterable[Path], uploads: Path) -> None:
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.uploads = Path(os.path.realpath(uploads))  # every group's upload folder is in it

    def source(self, source: str) -> str:
        """The name of a document's source as the store records it (its `path`)."""
        file_part, sep, entry = source.partition("#")
        path = Path(file_part)
        if not path.is_absolute():
            return redact_paths(source)
        if path.is_relative_to(self.uploads):  # an upload is one document, no `#n`
            return upload_title(path) or path.name
        root = next((r for r in self.roots if path.is_relative_to(r)), None)
        return (path.relative_to(root).as_posix() if root is not None else path.name) + sep + entry

    def label(self, text: str) -> str:
        """A document title or section path (``title > section``) with a title that is a
        server path named as :meth:`source` names it: a document the loader found no title
        for (a JSON corpus entry with a blank one) is titled by its source."""
        title, sep, rest = text.partition(PATH_SEP)
        return self.source(title) + sep + rest if Path(title.partition("#")[0]).is_absolute() else text

    def document(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row of the documents listing (:meth:`GraphRoute.documents`) as a client sees it."""
        return {**row, "path": self.source(str(row.get("path") or "")), "title": self.label(str(row.get("title") or ""))}

    def result(self, result: dict[str, Any]) -> dict[str, Any]:
        """A query's public JSON (:meth:`QueryResult.to_public_json`) with its evidence's and
        citations' document titles and section paths named as :meth:`label` names them."""
        for item in [*result.get("evidence", []), *result.get("citations", [])]:
            for key in ("document", "section_path"):
                if isinstance(item.get(key), str):
                    item[key] = self.label(item[key])
        return result


# --------------------------------------------------------------------------- API docs

DOCS_ASSETS = "/static-offline-docs"


def add_api_docs(app: "FastAPI", auth: list[Any]) -> None:
    """``/openapi.json``, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), each behind ``auth``
    (the token check), like every endpoint but ``/health``. The pages' script and style files
    are the Swagger UI and ReDoc that fastapi-offline ships (MIT), served by this server
    without a token, as the playground's page files are: the pages need no CDN or network."""
    import fastapi_offline
    from fastapi import Request
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    app.mount(DOCS_ASSETS, StaticFiles(directory=Path(fastapi_offline.__file__).parent / "static"), name="static-offline-docs")

    @app.get("/openapi.json", include_in_schema=False, dependencies=auth)
    async def openapi_schema() -> JSONResponse:
        return JSONResponse(app.openapi())

    def page(render: Callable[[str, str], HTMLResponse]) -> Callable[[Request], Awaitable[HTMLResponse]]:
        """An endpoint rendering a docs page from the schema's URL and the assets' folder."""

        async def endpoint(request: Request) -> HTMLResponse:
            root = request.scope.get("root_path", "")
            return render(f"{root}/openapi.json", f"{root}{DOCS_ASSETS}")

        return endpoint

    swagger = page(lambda schema, assets: get_swagger_ui_html(
        openapi_url=schema, title=f"{app.title} - Swagger UI", swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css", swagger_favicon_url=f"{assets}/favicon.png",
    ))
    redoc = page(lambda schema, assets: get_redoc_html(
        openapi_url=schema, title=f"{app.title} - ReDoc", redoc_js_url=f"{assets}/redoc.standalone.js",
        redoc_favicon_url=f"{assets}/favicon.png", with_google_fonts=False,
    ))
    app.add_api_route("/docs", swagger, include_in_schema=False, dependencies=auth)
    app.add_api_route("/redoc", redoc, include_in_schema=False, dependencies=auth)


# --------------------------------------------------------------------------- app factory


def create_app(config: "ServerConfig | None" = None, engine: "GraphRoute | None" = None) -> "FastAPI":
    """Build the app. Pass ``engine`` to share an already opened :class:`GraphRoute`
    (tests do); otherwise one is opened from ``config.store``."""
    from fastapi import Depends, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from graphroute.core import __version__
    from graphroute.core.lib import progress
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Match

    config = config or ServerConfig.from_env()
    if engine is None:
        from graphroute.core.engine import GraphRoute

        settings = Settings()
        if config.store:
            settings.store = config.store
        if config.group:
            settings.group = config.group
        engine = GraphRoute(settings=settings)
    gr = engine
    logger = logging.getLogger(LOGGER_NAME)
    jobs = JobManager(logger)
    pool = ThreadPoolExecutor(max_workers=max(1, config.query_workers), thread_name_prefix="graphroute-query")
    queue = QueryQueue(config.query_workers, config.queue_bound())
    health_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphroute-health")
    roots = [Path(os.path.realpath(r)) for r in config.index_roots]
    sources = SourceNames(roots, _upload_root(config, gr.store.location or "store"))
    timed_out = (
        f"the request took longer than {config.request_timeout_s:g} s; "
        "try a cheaper route or raise the server's --timeout"
    )

    async def run_limited(fn: Callable[[], T]) -> T:
        """Run blocking work in the query pool; 504 after the time limit. The limit is also
        the work's deadline (:mod:`graphroute.core.lib.deadline`), fixed when the request
        arrives: work that waited in the queue past it does not start, and a query stops at
        its next deadline check, so its thread is free again soon after the 504."""
        at = time.monotonic() + config.request_timeout_s

        def work() -> T:
            left = at - time.monotonic()
            if left <= 0:
                raise QueryTimeoutError(timed_out)
            with deadline_in(left):
                return fn()

        holds = _HOLDS_PLACE.get()  # a query's request took its place before its body was read
        if not holds and not queue.enter():
            raise queue.busy()
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(pool, work)
        try:
            return await asyncio.wait_for(fut, timeout=config.request_timeout_s)
        except TimeoutError:
            raise ApiError(504, "timeout", timed_out) from None
        finally:
            if not holds:
                queue.leave()

    bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <token>` (when the server has a token)")

    def authorised(creds: HTTPAuthorizationCredentials | None) -> bool:
        if not config.token:
            return True
        given = creds.credentials if creds is not None else ""
        return hmac.compare_digest(given.encode("utf-8"), config.token.encode("utf-8"))

    def bearer_of(request: Request) -> HTTPAuthorizationCredentials | None:
        """The request's bearer credentials, read without declaring the endpoint secured
        (``/health`` is open to everyone; the token only adds details)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return HTTPAuthorizationCredentials(scheme="Bearer", credentials=token.strip())

    def require_token(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if not authorised(creds):
            raise ApiError(
                401, "unauthorized", "missing or wrong bearer token (send `Authorization: Bearer <token>`)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def warm_up() -> None:
        try:
            if gr.group in gr.store.groups():
                t0 = time.perf_counter()
                # one throw-away query loads exactly what the default route needs (embedder,
                # spaCy, graph caches); models are cached per process, so queries reuse them
                gr.query("warm up", route=config.default_route, group=gr.group)
                log_event(logger, logging.INFO, "models loaded", group=gr.group, route=config.default_route,
                          seconds=round(time.perf_counter() - t0, 2))
        except Exception as exc:  # the first query will report it properly
            log_event(logger, logging.WARNING, "preload failed", error=f"{type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def lifespan(_app: "FastAPI") -> AsyncIterator[None]:
        if config.preload:
            asyncio.get_running_loop().run_in_executor(pool, warm_up)  # in the background
        yield
        jobs.shutdown()
        pool.shutdown(wait=False, cancel_futures=True)
        health_pool.shutdown(wait=False, cancel_futures=True)

    from fastapi import FastAPI

    # /openapi.json, /docs and /redoc are added below, behind the token like the API they describe
    app = FastAPI(
        title="graphroute",
        version=__version__,
        description="Query and index a graphroute store over HTTP. Same routes, overrides and JSON as the CLI.",
        lifespan=lifespan,
        openapi_url=None, docs_url=None, redoc_url=None,
    )
    app.state.engine = gr
    app.state.jobs = jobs
    app.state.config = config

    class BodyTooLarge(StarletteHTTPException):
        def __init__(self, message: str) -> None:
            super().__init__(413, message)

    def uses_query_queue(scope: dict[str, Any]) -> bool:
        """Whether a request is for an endpoint that takes its place in the query queue
        before its body is read (``queue.endpoints``), as the router will match it."""
        for route in app.router.routes:
            if getattr(route, "endpoint", None) in queue.endpoints and route.matches(scope)[0] is Match.FULL:
                return True
        return False

    app.add_middleware(
        RequestGuard, max_body_bytes=config.max_body_bytes, logger=logger, too_large=BodyTooLarge,  # type: ignore[arg-type]
        queue=queue, queued=uses_query_queue,
    )

    def request_id(request: Request) -> str | None:
        return request.scope.get("state", {}).get("request_id")

    def error_response(
        request: Request, status: int, code: str, message: str, headers: Mapping[str, str] | None = None, *, redact: bool = True,
    ) -> JSONResponse:
        """The error body; ``redact`` False for a message that holds nothing but the request's
        own URL path (not a server file, so never cut to its last part)."""
        body = ErrorBody(error=code, message=redact_paths(message) if redact else message, request_id=request_id(request))
        return JSONResponse(body.model_dump(), status_code=status, headers=dict(headers or {}))

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(BodyTooLarge)
    async def _too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
        return error_response(request, 413, "too_large", str(exc.detail))

    @app.exception_handler(GraphRouteError)
    async def _graphroute_error(request: Request, exc: GraphRouteError) -> JSONResponse:
        return error_response(request, http_status_for(exc), exc.code, message_for(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        # a query-string parameter out of range (`?limit=0`) is a bad request like any other
        # bad argument; a body that does not match the schema stays a 422
        if errors and all(tuple(e.get("loc", ()))[:1] == ("query",) for e in errors):
            return error_response(request, 400, "bad_parameter", validation_message(errors))
        if errors and errors[0].get("type") == "json_invalid":  # not JSON at all: where it breaks
            return error_response(request, 400, "bad_json", json_error_message(errors[0], exc.body))
        return error_response(request, 422, "invalid_request", validation_message(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Starlette's own errors (an unknown path 404, a wrong method 405) in the API's shape."""
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        # the path as the client sent it (still percent-encoded), at most a short prefix of it
        raw_path = request.scope.get("raw_path")
        sent = echo(raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path)
        about_the_path = {
            404: f"no such endpoint: {request.method} {sent} (see /docs)",
            405: f"{request.method} is not allowed on {sent}",
        }
        message = about_the_path.get(exc.status_code, str(exc.detail))
        return error_response(request, exc.status_code, code, message, exc.headers, redact=exc.status_code not in about_the_path)

    auth = [Depends(require_token)]
    add_api_docs(app, auth)

    def known_group(group: str) -> None:
        if group not in gr.store.groups():
            raise ApiError(
                404, "unknown_group",
                f"group '{group}' does not exist in this store (or is empty); index documents first: "
                f'POST /index {{"group": "{group}", "documents": [...]}}',
            )

    def group_uploads(group: str) -> Path:
        return _upload_dir_for(config, gr.store.location or "store", group)

    def forget_uploads(group: str, sources: list[str] | None) -> None:
        """Delete the uploaded text of a deleted group (None) or of its deleted documents."""
        remove_uploads(group_uploads(group), sources)

    def forget_failed_uploads(group: str, files: list[str]) -> None:
        """Delete the uploads a job could not index, unless a document of the group was read
        from that file before (an update that failed keeps the file its document names)."""
        if not files:
            return
        try:
            sources = {str(d["path"]).split("#", 1)[0] for d in gr.documents(group)}
        except NotFoundError:  # nothing of the group was ever indexed
            sources = set()
        forget_uploads(group, [f for f in files if f not in sources])

    def route_file(name: str) -> Path:
        """The file of a route *name*; the CLI's "unknown route" error (with its did-you-mean
        hint) otherwise. Names only: a path would let a client read server files."""
        routes = list_routes()
        if name in routes and re.match(NAME_PATTERN, name):
            return routes[name]
        if os.sep in name or name.endswith((".yaml", ".yml")) or (os.altsep and os.altsep in name):
            raise ApiError(400, "bad_request", "`route` must be a route name (`GET /routes`), not a path")
        find_route(name)  # raises RouteConfigError with the hint
        raise ApiError(404, "unknown_route", f"unknown route {name!r}")

    # ------------------------------------------------------------------ endpoints

    @app.get(
        "/health", response_model=HealthResponse, response_model_exclude_none=True, tags=["service"],
        responses=_error_responses(503),
    )
    async def health(request: Request) -> HealthResponse:
        """Liveness: 200 when the service and its store answer, 503 (within a few seconds) when
        the store does not. Needs no token; only a caller with the token (or any caller of a
        server without one) also gets the version, the backend and the groups."""
        full = authorised(bearer_of(request))

        def check() -> list[str]:
            gr.store.ping()
            return sorted(gr.store.groups()) if full else []

        loop = asyncio.get_running_loop()
        try:
            groups = await asyncio.wait_for(loop.run_in_executor(health_pool, check), timeout=HEALTH_TIMEOUT_S)
        except (TimeoutError, StoreError) as exc:
            why = f"the store did not answer within {HEALTH_TIMEOUT_S:g} s" if isinstance(exc, TimeoutError) else str(exc)
            raise ApiError(503, "store_unavailable", why if full else "the store is unavailable") from None
        if not full:
            return HealthResponse(status="ok")
        return HealthResponse(
            status="ok", version=__version__, backend=gr.store.backend, groups=groups[:MAX_PAGE_LIMIT], groups_total=len(groups),
        )

    @app.post(
        "/query", response_model=QueryResponse, tags=["query"], dependencies=auth,
        responses=_error_responses(400, 401, 404, 413, 503, 504),
    )
    async def query(body: QueryRequest) -> dict[str, Any]:
        """Answer a question through a route; the body of `graphroute query --json`."""
        group = body.group or gr.group
        route = body.route or config.default_route
        check_question(body.question, gr.settings.max_question_chars)
        route_file(route)
        overrides = overrides_from_mapping(body.overrides)

        def work() -> dict[str, Any]:
            refuse_server_side(gr.route(route), overrides)
            known_group(group)
            return sources.result(gr.query(body.question, route=route, group=group, overrides=overrides).to_public_json())

        return await run_limited(work)

    queue.endpoints.add(query)

    @app.get("/routes", response_model=list[RouteSummary], tags=["routes"], dependencies=auth, responses=_error_responses(401))
    async def routes() -> list[RouteSummary]:
        """Shipped routes and those in $GRAPHROUTE_ROUTES."""
        import yaml
        from graphroute.core.config.route import builtin_routes_dir

        shipped = builtin_routes_dir().resolve()
        out = []
        for name, path in list_routes().items():
            try:
                desc = str((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("description", "") or "")
            except Exception as exc:
                desc = f"(unreadable: {type(exc).__name__})"
            out.append(RouteSummary(name=name, description=desc.strip(), shipped=path.resolve().parent == shipped))
        return out

    @app.get(
        "/routes/{name}", response_model=RouteDetail, tags=["routes"], dependencies=auth,
        responses=_error_responses(400, 401, 404, 503),
    )
    async def route_show(name: str) -> RouteDetail:
        """The fully resolved route (after extends and environment overrides)."""
        if not re.match(NAME_PATTERN, name):
            raise ApiError(404, "unknown_route", f"unknown route {name!r}; `GET /routes` lists them")
        try:
            route_file(name)
        except RouteConfigError as exc:
            raise ApiError(404, "unknown_route", exc.render()) from None
        resolved = await run_limited(lambda: load_route(name, gr.registry))
        return RouteDetail(
            name=resolved.name, description=resolved.config.description,
            yaml=resolved.to_yaml(), config=resolved.config.to_yaml_dict(),
        )

    @app.get("/plugins", response_model=PluginsResponse, tags=["plugins"], dependencies=auth, responses=_error_responses(401))
    async def plugins() -> PluginsResponse:
        """Installed plugins and what each contributes (`graphroute plugins --json`)."""
        return PluginsResponse(plugins=gr.registry.plugins(), skipped=skipped_builtins())

    @app.post(
        "/index", response_model=JobInfo, status_code=202, tags=["index"], dependencies=auth,
        responses=_error_responses(400, 401, 403, 413, 503),
    )
    async def index(body: IndexRequest, request: Request) -> JobInfo:
        """Start indexing documents (title + text) or server-side paths; poll `GET /jobs/{id}`."""
        if not body.documents and not body.paths:
            raise ApiError(400, "bad_request", "nothing to index: send `documents` [{title, text}] or `paths`")
        group = body.group or gr.group
        await run_limited(lambda: check_group_name(gr.store, group))  # a new group's name must fit in a URL
        paths: list[Path] = []
        for raw in body.paths:
            if "\x00" in raw:
                raise ApiError(400, "bad_request", "paths must not contain NUL bytes")
            if not roots:
                raise ApiError(
                    403, "paths_disabled",
                    "server-side paths are disabled; send `documents` instead, or start the server with --index-root DIR",
                )
            p = Path(raw).expanduser()
            p = Path(os.path.realpath(p if p.is_absolute() else roots[0] / p))  # links followed
            if not any(p.is_relative_to(r) for r in roots):
                raise ApiError(403, "path_not_allowed", f"{echo(raw)!r} is outside the allowed --index-root folders")
            if not p.exists():
                raise ApiError(400, "bad_request", f"{echo(raw)!r} does not exist on the server")
            paths.append(p)
        if body.profile is not None:
            from graphroute.core.config.index_profile import (
                builtin_index_profiles_dir,
                load_index_profile,
            )
            from graphroute.core.errors import IndexProfileError

            shipped = sorted(p.stem for p in builtin_index_profiles_dir().glob("*.yaml"))
            if body.profile not in shipped:  # a name, never a file on the server
                raise ApiError(400, "bad_profile", f"unknown index profile {body.profile!r}; shipped profiles: {', '.join(shipped)}")
            try:
                load_index_profile(body.profile)
            except IndexProfileError as exc:
                raise ApiError(400, "bad_profile", str(exc)) from None
        upload_dir = group_uploads(group)
        documents = list(body.documents)

        def work(job: Job) -> dict[str, Any]:
            targets = list(paths)
            titles: dict[str, str] = {}  # an uploaded document's file -> its title, for the report
            if documents:
                job.progress = {**job.progress, "phase": "writing uploads"}
                written = write_uploads(upload_dir, documents)
                titles = {str(p): d.title for p, d in zip(written, documents, strict=True)}
                targets += written
            job.progress = {**job.progress, "phase": "indexing", "inputs": len(targets)}

            def on_progress(step: str, completed: float, total: float | None) -> None:
                job.progress = {**job.progress, "step": step, "completed": completed, "total": total}
                jobs.check_stopping()

            with progress.listen(on_progress):
                # files under the folders are checked on their real paths too: a link inside
                # an allowed folder must not reach a file elsewhere
                allowed = [*roots, upload_dir] if roots else None
                report = _jsonable(gr.index(targets, group=group, profile=body.profile, roots=allowed))
            forget_failed_uploads(group, [str(f.get("path")) for f in report.get("failed", []) if f.get("path") in titles])
            return public_report(report, titles, sources)

        job = jobs.submit(group, work, request_id(request) or "")
        return job.info()

    @app.get("/jobs/{job_id}", response_model=JobInfo, tags=["index"], dependencies=auth, responses=_error_responses(401, 404))
    async def job_status(job_id: str) -> JobInfo:
        """State, progress and (when finished) the report of an index job."""
        job = jobs.get(job_id)
        if job is None:
            raise ApiError(404, "unknown_job", f"no job {job_id!r} (jobs are kept in memory until the server restarts)")
        return job.info()

    from graphroute.core.apps.serve.manage import add_manage_routes

    add_manage_routes(
        app, gr, auth=auth, run_limited=run_limited, run_write=jobs.run_write, error_responses=_error_responses,
        forget_uploads=forget_uploads, public_document=sources.document,
        default_limit=DEFAULT_PAGE_LIMIT, max_limit=MAX_PAGE_LIMIT,
    )

    # what an app mounted on this one (the playground) reuses: the token check, the query pool
    app.state.auth, app.state.run_limited = auth, run_limited
    app.state.known_group, app.state.route_file = known_group, route_file
    app.state.query_queue = queue
    app.state.source_names = sources
    return app
