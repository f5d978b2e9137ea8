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
from typing import TYPE_CHECKING, Any, NamedTuple

from fastapi import Query, Request, Response
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
    path: str = Field(
        description="the file the document was read from, as the client knows it: relative to the server's "
        "--index-root folder, the title it was uploaded under (POST /index `documents`), or else the file's "
        "name; `#n` after it numbers an entry of a JSON corpus. Never a path on the server.",
    )
    content_hash: str | None
    indexed_at: str | None = Field(description="ISO 8601 UTC time of the run that (re)indexed it, when recorded")
    sentences: int


class DocumentsResponse(BaseModel):
    group: str
    documents: list[DocumentInfo] = Field(description="one page of the group's documents, ordered by title then id")
    total: int = Field(description="the group's documents in all")
    offset: int = Field(description="documents skipped before this page")
    limit: int = Field(description="the most documents this page could hold")
    next_offset: int | None = Field(description="`offset` of the next page; null on the last page")


class DeleteResponse(BaseModel):
    group: str
    deleted_group: bool = Field(False, description="true when the whole group was deleted")
    deleted: list[str] = Field(default_factory=list, description="ids of the deleted documents")
    documents: int = Field(description="documents deleted with the group, or left in it after a document delete")
    sentences: int | None = Field(None, description="sentences left in the group after a document delete")
    steps: dict[str, Any] = Field(default_factory=dict, description="what the index steps reported while updating the derived layers")
    warnings: list[str] = Field(default_factory=list)


class Page(NamedTuple):
    rows: list[Any]  # the page's items
    total: int  # items in the whole listing
    next_offset: int | None  # None on the last page


def page_of(rows: list[Any], limit: int, offset: int) -> Page:
    """The page of ``rows`` (the whole listing, in its order) that ``limit`` and ``offset`` select."""
    return read_page(rows[offset : offset + limit], len(rows), limit, offset)


def read_page(rows: list[Any], total: int, limit: int, offset: int) -> Page:
    """The page ``rows`` that ``limit`` and ``offset`` selected, read alone, of a listing of ``total`` items."""
    return Page(rows, total, offset + limit if offset + limit < total else None)


def add_page_headers(response: Response, request: Request, page: Page, limit: int) -> None:
    """Say the listing's total (`X-Total-Count`) and, when there is a next page, its URL
    (`Link: <...>; rel="next"`, relative to the server) on ``response``: the paging of a
    listing whose body is a list, and the same for one whose body is an object."""
    response.headers["X-Total-Count"] = str(page.total)
    if page.next_offset is not None:
        url = request.url.include_query_params(limit=limit, offset=page.next_offset)
        response.headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'


def add_manage_routes(
    app: FastAPI,
    gr: GraphRoute,
    *,
    auth: list[Any],
    run_limited: Callable[[Callable[[], Any]], Any],
    run_write: Callable[[Callable[[], Any]], Any],
    error_responses: Callable[..., dict[int | str, dict[str, Any]]],
    forget_uploads: Callable[[str, list[str] | None], None],
    public_document: Callable[[dict[str, Any]], dict[str, Any]],
    default_limit: int,
    max_limit: int,
) -> None:
    """Register the endpoints on ``app``. ``run_write`` runs a store write on the index
    writer thread and returns a concurrent future; ``forget_uploads(group, sources)`` deletes
    the text ``POST /index`` uploaded for a deleted group (None) or its deleted documents;
    ``public_document`` names a listed document's file (and a title that is one) as a
    client may see it; a listing's page holds ``default_limit`` items unless a request asks for up to
    ``max_limit``."""

    def limit_param() -> Any:
        return Query(default_limit, ge=1, le=max_limit, description=f"items per page ({default_limit} when omitted, at most {max_limit})")

    def offset_param() -> Any:
        return Query(0, ge=0, description="items to skip: 0 for the first page, then the previous page's `next_offset`")

    async def write(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = await asyncio.wrap_future(run_write(fn))
        return result

    @app.get(
        "/groups", response_model=list[GroupSummary], tags=["groups"], dependencies=auth,
        responses=error_responses(400, 401, 503),
    )
    async def groups(
        request: Request, response: Response, limit: int = limit_param(), offset: int = offset_param(),
    ) -> list[dict[str, Any]]:
        """One page of the store's groups, by name, with their document and sentence counts
        (`graphroute groups --json`). The body stays a list: the total is in `X-Total-Count`
        and the next page's URL in `Link` (`rel="next"`)."""

        def work() -> tuple[Page, list[dict[str, Any]]]:
            page = page_of(sorted(gr.store.groups()), limit, offset)
            return page, gr.groups(page.rows)  # only this page's groups are counted

        page, rows = await run_limited(work)
        add_page_headers(response, request, page, limit)
        return rows

    @app.get(
        "/groups/{group}/documents", response_model=DocumentsResponse, tags=["groups"], dependencies=auth,
        responses=error_responses(400, 401, 404, 503),
    )
    async def documents(
        group: str, request: Request, response: Response, limit: int = limit_param(), offset: int = offset_param(),
    ) -> dict[str, Any]:
        """One page of a group's documents, by title: id, title, path, content hash, when
        indexed, sentences; with the total and the next page's `offset`."""

        def work() -> Page:
            rows, total = gr.documents_page(group, limit, offset)  # only this page is read
            # an upload's name is read from its file
            return read_page([public_document(row) for row in rows], total, limit, offset)

        page: Page = await run_limited(work)
        add_page_headers(response, request, page, limit)
        return {"group": group, "documents": page.rows, "total": page.total,
                "offset": offset, "limit": limit, "next_offset": page.next_offset}

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
