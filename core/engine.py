"""The Python API: one object that opens a store and indexes and queries groups.

    from graphroute.core import GraphRoute

    gr = GraphRoute(store=".graphroute", group="docs")
    gr.index(["handbook.md"])
    result = gr.query("Who approves travel?", route="route1s_sentence",
                      overrides={"keyword_overlap.enabled": False})
    print(result.answer, result.trace)

The CLI and the HTTP server are thin layers over this class, so the three behave the same.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from graphroute.core.api.constants import DEFAULT_ROUTE
from graphroute.core.api.models import QueryResult
from graphroute.core.api.store import GraphStore, looks_like_server_address
from graphroute.core.config.clients import component_params
from graphroute.core.config.overrides import Overrides, overrides_from_mapping
from graphroute.core.config.resolve import ResolvedRoute, load_route
from graphroute.core.config.settings import STORE_PARAMS_ENV, Settings
from graphroute.core.errors import ConfigError, StoreLocationError, UserError
from graphroute.core.query.runner import check_question, run_route
from graphroute.core.query.services import Services
from graphroute.core.registry import Registry, get_registry


def open_store(
    location: str, *, settings: Settings | None = None, registry: Registry | None = None, create: bool = True
) -> GraphStore:
    """Open a store location with the first backend that handles it (a directory means the
    embedded store; ``neo4j://`` / ``bolt://`` URIs the Neo4j store), with that backend's
    parameters from ``settings.store_params`` (``GRAPHROUTE_STORE_PARAMS``). With ``create``
    False, a location that holds no store yet is a StoreLocationError (exit 2) instead of a
    new, empty store: what a command that only reads wants, so a mistyped path creates nothing."""
    registry = registry or get_registry()
    settings = settings or Settings()
    known = ", ".join(registry.stores.names()) or "none"
    unknown = sorted(set(settings.store_params) - set(registry.stores.names()))
    if unknown:
        raise ConfigError(
            f"{STORE_PARAMS_ENV} names no installed store backend: {', '.join(unknown)} (installed: {known})"
        )
    for entry in registry.stores.entries.values():
        if entry.cls.handles(location):
            given = settings.store_params.get(entry.cls.name, {})
            backend = entry.cls(component_params(entry.cls, given, f"store_params ({STORE_PARAMS_ENV}), store backend {entry.cls.name!r}"))
            if not create and entry.cls.would_create(location):
                raise StoreLocationError(
                    f"no store at {location}; index documents into it first, or check the store "
                    "location (--store, GRAPHROUTE_STORE)"
                )
            return backend.open(location, settings=settings)
    # A location no backend takes is the user's to fix (a typo, the Neo4j browser's http://
    # address for the Bolt one): say what each installed backend takes
    takes = "; ".join(
        f"{entry.cls.name} ({entry.cls.describe().rstrip('.')})" for entry in registry.stores.entries.values()
    )
    address = looks_like_server_address(location)
    raise StoreLocationError(
        f"no store backend handles {location!r}"
        + (
            f" (it looks like a server's address without its scheme: SCHEME://HOST:PORT; a new folder of "
            f"that name: ./{location})" if address else ""
        )
        + "; give a location one of the installed backends takes "
        f"(--store, GRAPHROUTE_STORE; NEO4J_URI for `--store neo4j`): {takes or 'none'}"
    )


class GraphRoute:
    """A store plus the services (models, clients) that routes use; thread-safe for queries.

    A store location that holds no store yet gets a new, empty one, since the object may be
    asked to index; ``create=False`` refuses it instead (StoreLocationError), as the CLI's
    commands that only read do."""

    def __init__(
        self,
        store: str | GraphStore | None = None,
        group: str | None = None,
        *,
        settings: Settings | None = None,
        registry: Registry | None = None,
        create: bool = True,
    ) -> None:
        self.settings = settings or Settings()
        self.registry = registry or get_registry()
        if isinstance(store, GraphStore):
            self.store = store
        else:
            self.store = open_store(
                store or self.settings.store, settings=self.settings, registry=self.registry, create=create
            )
        self.group = group or self.settings.group
        self._services: dict[str, Services] = {}
        self._routes: dict[tuple[str, str], ResolvedRoute] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ services
    def services(self, group: str | None = None) -> Services:
        group = group or self.group
        with self._lock:
            svc = self._services.get(group)
            if svc is None:
                from graphroute.core.config.clients import llm_factory

                svc = Services(
                    self.store, group, settings=self.settings, registry=self.registry,
                    llm_factory=llm_factory(self.settings, self.registry),
                )
                self._services[group] = svc
            return svc

    # ------------------------------------------------------------------ routes
    def route(self, name: str, overrides: Overrides | Mapping[str, Any] | None = None) -> ResolvedRoute:
        ov = overrides if isinstance(overrides, Overrides) or overrides is None else overrides_from_mapping(overrides)
        if ov is None or ov.is_empty():
            key = (name, "")
            with self._lock:
                cached = self._routes.get(key)
            if cached is not None:
                return cached
            resolved = load_route(name, self.registry)
            with self._lock:
                self._routes[key] = resolved
            return resolved
        return load_route(name, self.registry, overrides=ov)

    def query(
        self,
        question: str,
        route: str = DEFAULT_ROUTE,
        *,
        group: str | None = None,
        overrides: Overrides | Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> QueryResult:
        """Answer ``question`` through ``route``. A question longer than
        ``settings.max_question_chars`` is refused (QuestionError), and so is a group the
        store does not hold (NotFoundError, naming the groups it holds: a misspelt group is
        not an empty answer); with ``timeout_s`` the query is stopped after that many seconds
        (QueryTimeoutError)."""
        check_question(question, self.settings.max_question_chars)
        if timeout_s is not None and not timeout_s > 0:  # NaN too: it would stop nothing or everything
            raise UserError(f"timeout_s must be a positive number of seconds (got {timeout_s!r})")
        resolved = self.route(route, overrides)
        group = group or self.group
        with self._lock:
            known = group in self._services
        if not known:  # checked once per group: its services are kept from the first query on
            from graphroute.core.index.manage import require_group

            require_group(self.store, group)
        return run_route(resolved, question, self.services(group), timeout_s=timeout_s)

    # ------------------------------------------------------------------ index
    def index(
        self,
        paths: str | Path | Sequence[str | Path],
        *,
        group: str | None = None,
        profile: str | None = None,
        remove_missing: bool = False,
        roots: str | Path | Sequence[str | Path] | None = None,
    ) -> Any:
        """Index files or folders into the group (see :class:`~graphroute.core.index.pipeline.Indexer`);
        with ``roots``, only files whose real path is under one of them. One path may be given
        alone (``gr.index("docs/")``), not only in a list."""
        from graphroute.core.index.pipeline import Indexer

        indexer = Indexer(self.store, group or self.group, registry=self.registry, settings=self.settings, profile=profile)
        report = indexer.index_paths(
            _paths(paths), remove_missing=remove_missing, roots=_paths(roots) if roots is not None else None,
        )
        with self._lock:
            self._services.pop(group or self.group, None)
        return report

    def stats(self, group: str | None = None) -> dict[str, Any]:
        """Counts and index statistics of a group; NotFoundError (exit 2, HTTP 404) for a
        group the store does not hold."""
        from graphroute.core.index.manage import require_group
        from graphroute.core.index.stats import group_stats

        group = group or self.group
        require_group(self.store, group)
        return group_stats(self.store, group)

    def groups(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The store's groups with their document and sentence counts; with ``names``, only
        those groups, in that order (counting is the costly part: the server counts one page
        of groups at a time)."""
        from graphroute.core.api.models import Label

        rows = []
        for g in self.store.groups() if names is None else names:
            nodes = self.store.counts(g).get("nodes", {})
            rows.append({"group": g, "documents": nodes.get(Label.DOCUMENT.value, 0), "sentences": nodes.get(Label.SENTENCE.value, 0)})
        return rows

    def documents(self, group: str | None = None) -> list[dict[str, Any]]:
        """The group's documents: id, title, path, content hash, indexed at, sentences."""
        from graphroute.core.index.manage import list_documents

        return list_documents(self.store, group or self.group)

    def documents_page(self, group: str, limit: int, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """At most ``limit`` of the group's documents after ``offset`` (rows as
        :meth:`documents` has them, in its order) and how many it holds in all; only that
        page is read from the store."""
        from graphroute.core.index.manage import documents_page

        return documents_page(self.store, group, limit, offset)

    def delete(self, group: str, document: str | None = None, *, ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Delete a whole group, or the documents ``document`` names (an id, a title or a
        path) with the derived layers updated; later queries never cite them. ``ids``: the
        documents ``document`` was resolved to already (:func:`~graphroute.core.index.manage.
        documents_to_delete`, e.g. when a user confirmed them), deleted as they are: a document
        indexed under the same title since then is not."""
        from graphroute.core.index import manage

        if document is None:
            result = manage.delete_group(self.store, group)
        else:
            doc_ids = [*ids] if ids is not None else [d["id"] for d in manage.documents_to_delete(self.store, group, document)]
            result = manage.delete_documents(self.store, group, doc_ids, registry=self.registry, settings=self.settings)
            if not doc_ids:  # gone already: an interrupted delete's index steps, finished now
                result["warnings"] = [
                    f"no document {document!r} in group {group!r}; the group's last run had not finished its "
                    "index steps, and they are finished now",
                    *result["warnings"],
                ]
        with self._lock:
            self._services.pop(group, None)
        return result

    def close(self) -> None:
        self.store.close()


def _paths(given: str | Path | Sequence[str | Path]) -> list[Path]:
    """``given`` as a list of paths: a single str or Path is one path (a string is a sequence
    of characters, and iterating it would index "d", "o", "c", "s" and, for "docs/", "/")."""
    if isinstance(given, str | Path):
        return [Path(given)]
    return [Path(p) for p in given]
