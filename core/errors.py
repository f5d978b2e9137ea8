"""Every error graphroute raises on purpose, in one hierarchy, and the one place that maps
them to exit codes and HTTP statuses.

``GraphRouteError`` is the root. Each subclass says what kind of problem it is:

* :class:`UserError` - bad input the user can fix (a route, a profile, an argument): exit 2,
  HTTP 400. :class:`ConfigError` and its subclasses are user errors about configuration.
* :class:`PluginError` - a plugin or component name that is not installed or does not load.
* :class:`StoreError` - the store failed in a way the user can act on; an unreachable store
  is :class:`StoreUnavailableError` (exit 3, HTTP 503).
* :class:`LoaderError` - one file cannot be loaded; index runs report it per file.
* :class:`ModelError` - a model or client cannot be created, called or understood.
* :class:`QueryTimeoutError` - a query ran past its deadline and was stopped (HTTP 504).

Anything else that escapes is an internal error: exit 1, HTTP 500.

Exit codes: 0 success; 1 internal error (and ``graphroute index`` when no file could be
read); 2 user error; 3 an unreachable service or a query past its deadline; 4
``graphroute index`` read some files and could not read others (:data:`EXIT_FILES_FAILED`);
130 interrupted.
"""

from __future__ import annotations

from typing import Any

EXIT_USER = 2
EXIT_INTERNAL = 1
EXIT_UNAVAILABLE = 3
# `graphroute index`: some files of a supported type could not be read; the others were
# indexed (files of an unsupported type are skipped with a warning and do not count).
EXIT_FILES_FAILED = 4
EXIT_INTERRUPTED = 130  # Ctrl+C, as shells report a process that SIGINT stopped (128 + 2)


class GraphRouteError(Exception):
    """Base of every error graphroute raises on purpose."""

    exit_code: int = EXIT_INTERNAL
    http_status: int = 500
    code: str = "internal_error"  # the machine-readable `error` field of an HTTP error body


class UserError(GraphRouteError):
    """Bad input whose message is the whole story (exit 2, HTTP 400)."""

    exit_code = EXIT_USER
    http_status = 400
    code = "bad_request"

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.exit_code = code


class ConfigError(UserError):
    """A configuration problem: a route, an index profile, settings from the environment."""

    code = "bad_config"


class RouteConfigError(ConfigError):
    """A route config problem, with where it is and how to fix it."""

    code = "route_config"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        stage: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.stage = stage
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file or "<route>"
        if self.line:
            where += f":{self.line}"
        head = f"{where}: "
        if self.stage:
            head += f"stage '{self.stage}': "
        text = head + self.message
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class IndexProfileError(ConfigError):
    """An index profile that does not load or validate."""

    code = "bad_profile"


class LLMConfigError(ConfigError):
    """The LLM client named by the environment or a route cannot be configured."""


class NotFoundError(UserError):
    """A named thing (a group, a document) does not exist: exit 2, HTTP 404."""

    http_status = 404
    code = "not_found"


class GroupNameError(UserError):
    """A new group's name that a URL path segment of the HTTP API cannot hold (exit 2, HTTP 400)."""

    code = "bad_group"


class DatasetError(UserError):
    """A benchmark questions or corpus file that cannot be read."""


class ScaffoldError(UserError):
    """``graphroute new-plugin`` cannot create the package it was asked for."""


class QuestionError(UserError):
    """A question that is blank or longer than the question-length limit."""

    code = "bad_question"


class BadBooleanError(UserError):
    """A value that should be a boolean and is not one of true/false/1/0/yes/no."""

    code = "bad_boolean"


class PluginError(GraphRouteError):
    """A plugin or component that is not installed, not found or does not load."""

    exit_code = EXIT_USER
    http_status = 400
    code = "plugin"


class StoreError(GraphRouteError):
    """A store failed in a way the user can act on (bad location, closed, bad write)."""

    exit_code = EXIT_INTERNAL
    http_status = 503
    code = "store"


class StoreDamagedError(StoreError):
    """A store's file is damaged (a disk fault, a file cut short or overwritten): what it
    holds cannot be read reliably. The message names the file and how to recover."""

    code = "store_damaged"


class StoreLocationError(StoreError):
    """A store location the user named that cannot be used: a file where a folder belongs,
    a folder that cannot be created or written (exit 2)."""

    exit_code = EXIT_USER
    code = "store_location"

    @classmethod
    def read_only(cls, location: str, action: str, detail: str = "") -> StoreLocationError:
        """The one wording of a write refused because this process may only read the store:
        ``action`` says what could not be done to it ("indexed into", "deleted from"),
        ``detail`` why the backend found it read-only, where it knows."""
        why = f" ({detail})" if detail else ""
        return cls(f"store {location} is read-only for this process{why}; it can be queried, not {action}")


class StoreUnavailableError(StoreError):
    """The store's server cannot be reached or refuses the credentials."""

    exit_code = EXIT_UNAVAILABLE
    http_status = 503
    code = "store_unavailable"


class GroupBusyError(StoreError):
    """Another index run or delete is writing the group. Two at once would each build the
    derived layers (kNN edges, entity graph, communities) from what it read, and the one
    that finished last would leave them without the other's documents (exit 3, HTTP 409)."""

    exit_code = EXIT_UNAVAILABLE
    http_status = 409
    code = "group_busy"

    @classmethod
    def for_group(cls, group: str, location: str, detail: str = "", after: str = "") -> GroupBusyError:
        """The one wording of every backend: ``detail`` names the holder where the backend
        knows it, ``after`` says when a killed holder lets go."""
        held = f" ({detail})" if detail else ""
        return cls(
            f"group {group!r} of store {location} is being written by another index run or delete{held}; "
            f"wait for it to finish, then run this again{after}"
        )


class LoaderError(GraphRouteError):
    """A file that cannot be loaded; the message says which file and why."""

    exit_code = EXIT_USER
    http_status = 400
    code = "bad_document"


class ModelError(GraphRouteError):
    """A model or client (embedder, LLM, reranker) that cannot be created or called."""

    code = "model_error"


class ServiceError(ModelError):
    """A model or client cannot be created (missing extra, bad settings)."""

    exit_code = EXIT_USER
    http_status = 400


class RemoteCallError(ModelError):
    """A remote model call failed after its retries."""

    exit_code = EXIT_UNAVAILABLE
    http_status = 502
    code = "remote_call_failed"

    def __init__(self, message: str, *, status: int | None = None, retries: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.retries = retries


class EmbeddingDimensionError(ModelError):
    """An embedder's vectors do not fit the group's stored vectors."""

    exit_code = EXIT_USER
    http_status = 400


class ProfileMismatchError(UserError):
    """An index run would parse or embed only part of a group with other settings than the
    rest of it was (another index profile, or graphroute's own parsing changed since), which
    would leave one group with vectors of two kinds; nothing is written."""

    http_status = 409
    code = "profile_mismatch"


class EmbedderMismatchError(EmbeddingDimensionError):
    """A query's embedder is not the one (model and runtime) that made the group's vectors."""


class LLMNotConfiguredError(LLMConfigError):
    """A stage needs an LLM and none is configured (and it has no offline fallback)."""


class LLMOutputError(ModelError):
    """The model's reply could not be parsed/validated, even after a repair round.
    ``usage`` holds what the attempts cost (an ``api.components.LLMResponse``; typed Any
    because errors sit below every other layer), so a stage can still account for them."""

    http_status = 502
    code = "bad_model_output"

    def __init__(self, message: str, *, usage: Any = None) -> None:
        super().__init__(message)
        self.usage = usage


class LLMRefusalError(LLMOutputError):
    """The model declined to answer (a refusal or a content-filter stop)."""

    code = "model_refused"


class QueryTimeoutError(GraphRouteError):
    """A query ran past its deadline; the runner stopped it at its next check."""

    exit_code = EXIT_UNAVAILABLE
    http_status = 504
    code = "timeout"


class StageError(GraphRouteError):
    """A stage raised something that is not a GraphRouteError (a bug, in a plugin or here):
    the message names the stage, its registered name and the route, the cause is chained."""

    code = "stage_failed"

    def __init__(self, stage: str, use: str, cause: BaseException, route: str | None = None) -> None:
        self.stage, self.use, self.cause, self.route = stage, use, cause, route
        super().__init__(self.render())

    def render(self) -> str:
        where = f" of route '{self.route}'" if self.route else ""
        return f"stage '{self.stage}' (`{self.use}`){where} failed: {type(self.cause).__name__}: {self.cause}"

    def in_route(self, route: str) -> StageError:
        """The same error with the route named (the runner knows it, the stage does not)."""
        self.route = route
        self.args = (self.render(),)
        return self


class IndexCancelled(GraphRouteError):
    """An index run stopped at its next step of progress because the process running it is
    stopping (the HTTP server's shutdown); the next run of the same input finishes it."""

    exit_code = EXIT_INTERRUPTED
    http_status = 503
    code = "cancelled"


def message_for(exc: BaseException) -> str:
    """The text shown to a user: a route error with its file, line, stage and fix."""
    return exc.render() if isinstance(exc, RouteConfigError) else str(exc)


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for an error that reached the command line."""
    if isinstance(exc, GraphRouteError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_INTERNAL


def http_status_for(exc: BaseException) -> int:
    """The HTTP status for an error that reached the API."""
    return exc.http_status if isinstance(exc, GraphRouteError) else 500
