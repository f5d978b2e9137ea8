"""Managing what is indexed: list groups and documents, delete a document or a group.

The CLI (``graphroute groups|documents|delete``), the HTTP API (``/groups``) and
:class:`~graphroute.core.engine.GraphRoute` all go through these functions. Deleting a
document goes through the indexer's own removal path (:meth:`Indexer.index_paths` with
``remove``), so the derived layers (kNN edges, entity graph, communities) are updated exactly
as when ``graphroute index --remove-missing`` drops a document whose file is gone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from graphroute.core.api.constants import DOCUMENTS_META, INDEX_PROFILE_META
from graphroute.core.api.models import Label, Node
from graphroute.core.api.store import GraphStore
from graphroute.core.config.settings import Settings
from graphroute.core.errors import GroupNameError, NotFoundError, StoreLocationError, UserError
from graphroute.core.index.stats import unfinished_run
from graphroute.core.registry import Registry

MAX_GROUP_CHARS = 200
DELETED_FROM = "deleted from"  # what a read-only store's refusal says a delete could not do
GROUP_NAME_RULE = (
    f"a group name is 1 to {MAX_GROUP_CHARS} characters without '/', '\\', control characters or "
    "white space at either end, and not '.' or '..' (it is a path segment of the HTTP API's URLs)"
)


def check_group_name(store: GraphStore, group: str) -> None:
    """A GroupNameError when indexing would create a group called ``group`` and that name
    breaks :data:`GROUP_NAME_RULE`. A group the store already holds passes whatever its name,
    so a store written before the rule keeps working."""
    if (
        group.strip() == group and 0 < len(group) <= MAX_GROUP_CHARS and group not in (".", "..")
        and "/" not in group and "\\" not in group and group.isprintable()
    ) or group in store.groups():
        return
    shown = group if len(group) <= 80 else group[:80] + "..."
    raise GroupNameError(f"cannot create group {shown!r}: {GROUP_NAME_RULE}")


def require_group(store: GraphStore, group: str) -> None:
    """A NotFoundError naming the groups that exist, unless ``group`` holds anything."""
    known = store.groups()
    if group not in known:
        listed = ", ".join(known) if known else "none"
        raise NotFoundError(f"group {group!r} not found in store '{store.location}' (groups: {listed}); "
                            "a group exists once documents are indexed into it")


def list_documents(store: GraphStore, group: str) -> list[dict[str, Any]]:
    """The group's documents, as :func:`documents_page` lists them, all at once."""
    return documents_page(store, group, None)[0]


def documents_page(
    store: GraphStore, group: str, limit: int | None, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """At most ``limit`` of the group's documents (all the rest when None) after ``offset``,
    ordered by title (case-insensitively) then id, and how many the group holds in all. A
    row: id, title, path (the loader's source), content hash, when it was indexed (None for
    documents indexed before that was recorded) and its sentence count. Only the page is
    read from the store (:meth:`GraphStore.document_page`); the total is a count."""
    require_group(store, group)
    nodes = store.document_page(group, limit, offset)
    total = offset + len(nodes) if limit is None else store.count_nodes(group, Label.DOCUMENT.value)
    return _document_rows(store, group, nodes, whole=limit is None and not offset), total


def _document_rows(store: GraphStore, group: str, nodes: list[Node], *, whole: bool) -> list[dict[str, Any]]:
    """The listing's rows of the Document ``nodes``; ``whole``: they are all of the group's."""
    meta: dict[str, Any] = store.get_meta(group, DOCUMENTS_META) or {}
    rows: list[dict[str, Any]] = []
    uncounted: list[dict[str, Any]] = []
    for node in nodes:
        info = meta.get(node.id) or {}
        row = {
            "id": node.id,
            "title": node.props.get("title") or info.get("title") or "",
            "path": node.props.get("source") or info.get("source") or "",
            "content_hash": node.props.get("content_hash") or info.get("hash"),
            "indexed_at": info.get("indexed_at"),
            "sentences": node.props.get("sentence_count"),
        }
        if row["sentences"] is None:
            uncounted.append(row)
        rows.append(row)
    # a document node without its count: the whole listing counts the group's sentences in
    # one scan, a part of it those of its own documents
    if uncounted and whole:
        per_doc = Counter(n.doc_id for n in store.iter_nodes(group, Label.SENTENCE.value))
    elif uncounted:
        per_doc = Counter({
            row["id"]: sum(1 for _ in store.iter_nodes(group, Label.SENTENCE.value, doc_id=row["id"])) for row in uncounted
        })
    for row in uncounted:
        row["sentences"] = per_doc.get(row["id"], 0)
    return rows


def resolve_documents(store: GraphStore, group: str, document: str) -> list[dict[str, Any]]:
    """The documents ``document`` names: an id, else a title, else a path (every document
    loaded from that file). A title two documents share is refused with their ids. An id is
    looked up alone; a title or a path reads the group's listing (which names a group that
    does not exist)."""
    named = [n for n in store.get_nodes(group, [document]) if n.label == Label.DOCUMENT]
    if named:
        return _document_rows(store, group, named, whole=False)
    docs = list_documents(store, group)
    by_title = [d for d in docs if d["title"] == document]
    if len(by_title) == 1:
        return by_title
    if len(by_title) > 1:
        ids = ", ".join(d["id"] for d in by_title)
        raise UserError(f"{len(by_title)} documents in group {group!r} are titled {document!r}; name one by id: {ids}")
    wanted = {document, str(Path(document).expanduser().resolve())}
    by_path = [d for d in docs if str(d["path"]).split("#", 1)[0] in wanted or d["path"] in wanted]
    if by_path:
        return by_path
    raise NotFoundError(
        f"no document {document!r} in group {group!r} (by id, title or path); "
        f"list them with: graphroute documents --group {group}"
    )


def documents_to_delete(store: GraphStore, group: str, document: str) -> list[dict[str, Any]]:
    """The documents a delete of ``document`` removes (:func:`resolve_documents`), or none
    when it names nothing in a group whose last run has not finished its index steps: the
    same delete again after one stopped in them, which had removed the document before
    updating the derived layers; :func:`delete_documents` with no ids finishes them."""
    try:
        return resolve_documents(store, group, document)
    except NotFoundError:
        if unfinished_run(store, group) is None:
            raise
        return []


def delete_documents(
    store: GraphStore, group: str, doc_ids: list[str], *, registry: Registry, settings: Settings
) -> dict[str, Any]:
    """Delete documents and update the derived layers, with the profile the group was
    indexed with (so nothing else is re-parsed or re-embedded)."""
    from graphroute.core.config.index_profile import IndexProfile, load_index_profile
    from graphroute.core.index.pipeline import Indexer

    stored = store.get_meta(group, INDEX_PROFILE_META)
    profile = IndexProfile.model_validate(stored) if isinstance(stored, dict) else load_index_profile(None)
    indexer = Indexer(store, group, registry=registry, settings=settings, profile=profile)
    report = indexer.index_paths([], remove=doc_ids, action=DELETED_FROM)
    return {
        "group": group,
        "deleted": doc_ids,
        "documents": report.documents,
        "sentences": report.sentences,
        "steps": report.steps,
        "warnings": report.warnings,
    }


def delete_group(store: GraphStore, group: str) -> dict[str, Any]:
    """Delete everything the group holds: nodes, edges, vectors and metadata."""
    require_group(store, group)
    if store.read_only:
        raise StoreLocationError.read_only(repr(store.location), DELETED_FROM)
    with store.index_lock(group):  # not under a run that is indexing into it
        n = store.counts(group).get("nodes", {}).get(Label.DOCUMENT.value, 0)
        store.delete_group(group)
    return {"group": group, "deleted_group": True, "documents": n}
