"""The HTTP endpoints that manage what is indexed: ``GET /groups``,
``GET /groups/{group}/documents``, ``DELETE /groups/{group}`` and
``DELETE /groups/{group}/documents/{document}``.

Thin layers over :class:`~graphroute.core.engine.GraphRoute` (``groups()``, ``documents()``,
``delete()``), like ``graphroute groups|documents|delete``; token-protected like the rest of
the API. Deletes run on the index jobs' writer thread, so a delete never interleaves with an
index run of the same store, and a delete also deletes the text ``POST /index`` uploaded for
what it deleted (the server keeps uploads on its disk only to index them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from fastapi import FastAPI
    from graphroute.core.engine import GraphRoute


class GroupSummary(BaseModel):
    group: str
    documents: int
    sentences: int


class DocumentInfo(BaseModel):
    id: str
    title: str
    path: str = Field(description="where the document was loaded from (its loader's source)")
    content_hash: str | None
    indexed_at: str | None = Field(description="ISO 8601 UTC time of the run that (re)indexed it, when recorded")
    sentences: int


class DocumentsResponse(BaseModel):
    group: str
    documents: list[DocumentInfo]


class DeleteResponse(BaseModel):
    group: str
    deleted_group: bool = Field(False, description="true when the whole group was deleted")
    deleted: list[str] = Field(default_factory=list, description="ids of the deleted documents")
    documents: int = Field(description="documents deleted with the group, or left in it after a document delete")
    sentences: int | None = Field(None, description="sentences left in the group after a document delete")
    steps: dict[str, Any] = Field(default_factory=dict, description="what the index steps reported while updating the derived layers")
    warnings: list[str] = Field(default_factory=list)


def add_manage_routes(
    app: FastAPI,
    gr: GraphRoute,
    *,
    auth: list[Any],
    run_limited: Callable[[Callable[[], Any]], Any],
    run_write: Callable[[Callable[[], Any]], Any],
    error_responses: Callable[..., dict[int | str, dict[str, Any]]],
    forget_uploads: Callable[[str, list[str] | None], None],
) -> None:
    """Register the endpoints on ``app``. ``run_write`` runs a store write on the index
    writer thread and returns a concurrent future; ``forget_uploads(group, sources)`` deletes
    the text ``POST /index`` uploaded for a deleted group (None) or its deleted documents."""

    async def write(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = await asyncio.wrap_future(run_write(fn))
        return result

    @app.get("/groups", response_model=list[GroupSummary], tags=["groups"], dependencies=auth, responses=error_responses(401, 503))
    async def groups() -> list[dict[str, Any]]:
        """The store's groups with their document and sentence counts (`graphroute groups --json`)."""
        rows: list[dict[str, Any]] = await run_limited(gr.groups)
        return rows

    @app.get(
        "/groups/{group}/documents", response_model=DocumentsResponse, tags=["groups"], dependencies=auth,
        responses=error_responses(401, 404, 503),
    )
    async def documents(group: str) -> dict[str, Any]:
        """A group's documents: id, title, path, content hash, when indexed, sentences."""
        rows = await run_limited(lambda: gr.documents(group))
        return {"group": group, "documents": rows}

    @app.delete(
        "/groups/{group}", response_model=DeleteResponse, tags=["groups"], dependencies=auth,
        responses=error_responses(401, 404, 409, 503),
    )
    async def delete_group(group: str) -> dict[str, Any]:
        """Delete a group: its documents, derived layers, metadata and uploaded text."""

        def work() -> dict[str, Any]:
            result = gr.delete(group)
            forget_uploads(group, None)
            return result

        return await write(work)

    @app.delete(
        "/groups/{group}/documents/{document}", response_model=DeleteResponse, tags=["groups"], dependencies=auth,
        responses=error_responses(400, 401, 404, 409, 503),
    )
    async def delete_document(group: str, document: str) -> dict[str, Any]:
        """Delete one document (by id, as `GET /groups/{group}/documents` lists it, or by
        title) and update the group's derived layers; later queries never cite it, and the
        text uploaded for it is deleted from the server."""

        def work() -> dict[str, Any]:
            sources = {d["id"]: str(d["path"]) for d in gr.documents(group)}
            result = gr.delete(group, document)
            forget_uploads(group, [sources[i] for i in result["deleted"] if i in sources])
            return result

        return await write(work)
