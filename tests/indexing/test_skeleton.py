"""The skeleton builder: structure, metadata and filters, with the real spaCy segmenter."""

from __future__ import annotations

from collections import Counter

from graphroute.core.api.components import Block, SourceDocument
from graphroute.core.api.models import content_hash
from graphroute.core.index.skeleton import (
    MERGED_CONFIDENCE,
    DocumentSkeleton,
    ParseLimits,
    doc_id_for,
    is_noise,
    linearize_row,
    plan_document,
    skeletons,
)
from graphroute.plugins.segmenters.spacy_segmenter import SpacySegmenter


def build(blocks: list[Block], title: str = "Lease", **limits: object) -> DocumentSkeleton:
    doc = SourceDocument(title=title, source=f"/docs/{title}.md", blocks=blocks, content_hash=content_hash(str(blocks)))
    (sk,) = skeletons([plan_document(doc)], SpacySegmenter().split, "g", ParseLimits(**limits))  # type: ignore[arg-type]
    return sk


def nodes(sk: DocumentSkeleton, label: str) -> list:  # type: ignore[type-arg]
    return [n for n in sk.nodes if n.label == label]


def edges(sk: DocumentSkeleton, et: str) -> list[tuple[str, str]]:
    return [(e.src, e.dst) for e in sk.edges if e.type == et]


LEASE = [
    Block("title", "Lease"),
    Block("paragraph", "This lease is made between Acme and Bob. Contoso Ltd. is at P.O. Box 123, FL."),
    Block("heading", "Rent", level=2),
    Block("paragraph", "Rent is due on the first day of each month. Late rent costs a fee of fifty dollars."),
    Block("heading", "Late fees", level=3),
    Block("paragraph", "Fees accrue daily after the fifth day."),
    Block("heading", "Repairs", level=2),
    Block("paragraph", "The landlord repairs the roof and the heating system."),
    Block("table", rows=[["Item", "Amount"], ["Rent", "$900"], ["Deposit", ""]]),
    Block("kvp", "Lease number: 42"),
    Block("page_header", "Acme confidential"),
]


def test_sections_paths_and_hierarchy_edges() -> None:
    sk = build(LEASE)
    secs = {n.props["section_path"]: n for n in nodes(sk, "Section")}
    assert set(secs) == {"Lease", "Lease > Rent", "Lease > Rent > Late fees", "Lease > Repairs"}
    root = secs["Lease"]
    assert edges(sk, "HAS_SECTION") == [(sk.doc_id, root.id)]
    sub = set(edges(sk, "SUBSECTION_OF"))
    assert (secs["Lease > Rent > Late fees"].id, secs["Lease > Rent"].id) in sub
    assert (secs["Lease > Rent"].id, root.id) in sub and (secs["Lease > Repairs"].id, root.id) in sub
    assert {s for s, _ in edges(sk, "IN_DOCUMENT")} >= {n.id for n in nodes(sk, "Section")}
    # every node and edge is owned by the document, ids derive from it
    assert all(n.doc_id == sk.doc_id and n.id.startswith(sk.doc_id) for n in sk.nodes)
    assert all(e.doc_id == sk.doc_id for e in sk.edges)
    assert sk.doc_id == doc_id_for("/docs/Lease.md")


def test_sentence_metadata_is_unified_and_offsets_point_into_the_paragraph() -> None:
    sk = build(LEASE)
    sents = nodes(sk, "Sentence")
    texts = [s.props["text"] for s in sents]
    assert "Contoso Ltd. is at P.O. Box 123, FL." in texts
    chunks = {c.id: c.props["text"] for c in nodes(sk, "TextChunk")}
    for s in sents:
        p = s.props
        assert p["parent_paragraph_text"][p["char_offset"] : p["char_offset"] + p["char_length"]] == p["text"]
        assert chunks[p["chunk_id"]][p["chunk_char_offset"] : p["chunk_char_offset"] + p["char_length"]] == p["text"]
        assert p["document"] == "Lease" and p["section_path"].startswith("Lease")
        assert p["source"] in ("paragraph", "table_row") and p["confidence"] == 1.0
        for key in ("page", "prev_sentence_id", "next_sentence_id", "parent_paragraph_id"):
            assert key in p
    # titles, KVPs and page headers are metadata, never sentences
    assert not any(t in ("Lease", "Lease number: 42", "Acme confidential") for t in texts)
    doc = nodes(sk, "Document")[0]
    assert doc.props["metadata"] == {"kvps": ["Lease number: 42"], "page_headers": ["Acme confidential"]}


def test_table_rows_are_linearised_sentences() -> None:
    sk = build(LEASE)
    rows = [s.props["text"] for s in nodes(sk, "Sentence") if s.props["source"] == "table_row"]
    assert rows == ["Item: Rent | Amount: $900", "Item: Deposit"]
    assert linearize_row(None, ["a", "", "b"]) == "a | b"


def test_chunks_never_cross_sections_and_respect_the_token_bound() -> None:
    blocks = [Block("paragraph", f"Sentence number {i} talks about the garden and the fence.") for i in range(30)]
    blocks.insert(10, Block("heading", "Second", level=2))
    sk = build(blocks, chunk_max_tokens=40)
    chunk_section = {c.id: c.props["section_id"] for c in nodes(sk, "TextChunk")}
    for c in nodes(sk, "TextChunk"):
        assert c.props["tokens"] <= 40
    for par in nodes(sk, "Paragraph"):
        assert chunk_section[par.props["chunk_id"]] == par.props["section_id"]
    assert len(set(chunk_section.values())) == 2 and len(chunk_section) > 2
    # NEXT links only inside a chunk, in reading order
    chunk_of = {s.id: s.props["chunk_id"] for s in nodes(sk, "Sentence")}
    nxt = edges(sk, "NEXT")
    assert nxt and all(chunk_of[a] == chunk_of[b] for a, b in nxt)
    pos = {s.id: s.props["position"] for s in nodes(sk, "Sentence")}
    assert all(pos[b] == pos[a] + 1 for a, b in nxt)


def test_packed_chunks_cross_sections_and_keep_each_sentence_in_its_own() -> None:
    sk = build(LEASE, chunk_sections="pack")
    (chunk,) = nodes(sk, "TextChunk")  # the whole lease fits in 512 tokens
    sections = {s.props["path"]: s.id for s in nodes(sk, "Section")}
    assert chunk.props["section_path"] == "Lease" and chunk.props["section_id"] == sections["Lease"]
    # each section the chunk enters is named on its own line, the path below the chunk's section
    blocks = chunk.props["text"].split("\n\n")
    assert [b for b in blocks if b in ("Rent", "Rent > Late fees", "Repairs")] == ["Rent", "Rent > Late fees", "Repairs"]
    assert blocks.index("Rent > Late fees") == blocks.index("Fees accrue daily after the fifth day.") - 1
    assert sorted(dst for src, dst in edges(sk, "IN_SECTION") if src == chunk.id) == sorted(sections.values())
    for sen in nodes(sk, "Sentence"):
        start = sen.props["chunk_char_offset"]
        assert chunk.props["text"][start : start + sen.props["char_length"]] == sen.props["text"]
    fees = next(s for s in nodes(sk, "Sentence") if s.props["text"].startswith("Fees accrue"))
    assert fees.props["section_path"] == "Lease > Rent > Late fees"
    i = sk.sentence_ids.index(fees.id)
    assert sk.sentence_sections[i] == sections["Lease > Rent > Late fees"]
    assert sk.sentence_embed_texts[i].startswith("[Document: Lease | Section: Lease > Rent > Late fees] ")

    # chunks still hold at most chunk_max_tokens (section lines counted); a chunk inside one
    # section's subtree belongs to that section
    small = build(LEASE, chunk_sections="pack", chunk_max_tokens=30)
    chunks = nodes(small, "TextChunk")
    assert len(chunks) > 1 and all(c.props["tokens"] <= 30 for c in chunks)
    rent = next(c for c in chunks if "Rent is due" in c.props["text"])
    assert rent.props["section_path"] == "Lease > Rent" and rent.props["text"].endswith("Late fees\n\nFees accrue daily after the fifth day.")
    # split (the default) starts a chunk at every section
    assert len(nodes(build(LEASE), "TextChunk")) == 4


def test_oversized_paragraph_is_split_so_it_fits_one_chunk() -> None:
    para = " ".join(f"The tenant number {i} paid the monthly rent in full." for i in range(40))
    sk = build([Block("paragraph", para)], chunk_max_tokens=50)
    assert sk.stats["paragraphs_split"] == 1
    assert len(nodes(sk, "Paragraph")) > 1
    assert all(c.props["tokens"] <= 50 for c in nodes(sk, "TextChunk"))
    chunk_ids = {c.id for c in nodes(sk, "TextChunk")}
    per_par = Counter(s for s, d in edges(sk, "PART_OF") if s.startswith(sk.doc_id + ":par") and d in chunk_ids)
    assert set(per_par.values()) == {1} and len(per_par) == len(nodes(sk, "Paragraph"))


def test_fragments_merge_noise_drops_and_cross_chunk_dedup() -> None:
    blocks = [
        Block("paragraph", "The deposit is held in escrow. It is returned within thirty days. Yes."),
        Block("paragraph", "Signature: ______"),
        Block("paragraph", "42"),
        Block("heading", "Again", level=2),
        Block("paragraph", "The deposit is held in escrow. A different sentence about the garden shed."),
    ]
    sk = build(blocks)
    texts = [s.props["text"] for s in nodes(sk, "Sentence")]
    merged = [s for s in nodes(sk, "Sentence") if s.props["confidence"] == MERGED_CONFIDENCE]
    assert [s.props["text"] for s in merged] == ["It is returned within thirty days. Yes."]
    assert not any("Signature" in t or t == "42" for t in texts)
    assert texts.count("The deposit is held in escrow.") == 1  # the repeat in chunk 2 is dropped
    assert sk.stats["dedup_dropped"] == 1 and sk.stats["noise_dropped"] >= 2 and sk.stats["fragments_merged"] == 1


def test_label_prefix_in_embedded_text_only() -> None:
    sk = build(LEASE)
    s = nodes(sk, "Sentence")[0]
    i = sk.sentence_ids.index(s.id)
    assert sk.sentence_embed_texts[i] == f"[Document: Lease | Section: {s.props['section_path']}] {s.props['text']}"
    assert not s.props["text"].startswith("[")
    off = build(LEASE, label_prefix=False)
    assert off.sentence_embed_texts[0] == nodes(off, "Sentence")[0].props["text"]


def test_chunks_are_embedded_under_their_heading_path() -> None:
    sk = build(LEASE)
    c = nodes(sk, "TextChunk")[0]
    i = sk.chunk_ids.index(c.id)
    assert sk.chunk_embed_texts[i] == f"{c.props['section_path']}\n{c.props['text']}"
    assert c.props["section_path"].startswith("Lease")
    brackets = build(LEASE, chunk_label="brackets")
    assert brackets.chunk_embed_texts[0].startswith("[Document: Lease | Section: ")
    off = build(LEASE, label_prefix=False)
    assert off.chunk_embed_texts[0] == nodes(off, "TextChunk")[0].props["text"]


def test_document_without_headings_gets_a_root_section_named_after_its_title() -> None:
    sk = build([Block("paragraph", "Just one paragraph of plain text here.")], title="Memo")
    (sec,) = nodes(sk, "Section")
    assert sec.props["section_path"] == "Memo" and sec.props["level"] == 0


def test_noise_filter() -> None:
    for t in ("Signature: ____", "Date:", "Name of tenant:", "12", "3.", "[ ] Yes", "— — —"):
        assert is_noise(t), t
    for t in ("The following terms apply:", "Rent is $500.", "Contoso Ltd. is at P.O. Box 123, FL."):
        assert not is_noise(t), t
