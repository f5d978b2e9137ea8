"""Entity-name normalisation and merging, shared by index time and query time.

An entity is identified by its *normalised* name, so the index (which merges the surface
forms extractors find) and the query side (which resolves names from a question to Entity
nodes) must normalise identically: both import :func:`normalize_name` from here and nowhere
else. Entity node ids are ``ent:<normalised name>`` (:func:`entity_id`).

Normalisation folds what does not change *which* thing a name denotes:

* unicode compatibility forms (NFKC: full-width letters, ligatures, non-breaking spaces),
* case (``casefold``, so ``Straße`` and ``STRASSE`` meet),
* possessives (``Einstein's`` -> ``einstein``),
* a leading article (``The Beatles`` -> ``beatles``),
* punctuation (``U.S.`` -> ``us``, ``Jean-Paul`` -> ``jean paul``) and whitespace runs.

Accents are kept: stripping them would merge distinct names in many languages, and fuzzy
matching at query time can bridge ``Dröm``/``Drom`` where it matters.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass, field

ENTITY_ID_PREFIX = "ent:"

# Leading articles dropped when something follows them ("The Who" -> "who", "The" stays).
LEADING_ARTICLES: frozenset[str] = frozenset({"the", "a", "an"})

_APOSTROPHES = "'\u2019\u2018\u02bc\u0060\u00b4"
_POSSESSIVE = re.compile(rf"(?<=\w)[{_APOSTROPHES}]s?(?=\W|$)")
# Periods inside abbreviations vanish ("U.S." -> "US", "Dr." -> "Dr"); apostrophes inside
# words too ("O'Brien" -> "OBrien"), so spelling variants meet.
_JOINERS = re.compile(rf"[.{_APOSTROPHES}]")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize_name(name: str) -> str:
    """The canonical form of an entity name; ``""`` when nothing meaningful is left.

    Idempotent: ``normalize_name(normalize_name(x)) == normalize_name(x)``.
    """
    s = unicodedata.normalize("NFKC", name).casefold()
    s = _POSSESSIVE.sub("", s)
    s = _JOINERS.sub("", s)
    s = _NON_WORD.sub(" ", s).strip()
    words = s.split()
    while len(words) > 1 and words[0] in LEADING_ARTICLES:
        words = words[1:]
    return " ".join(words)


def entity_id(name: str) -> str:
    """Node id of the entity a name denotes (the name is normalised first)."""
    return ENTITY_ID_PREFIX + normalize_name(name)


def is_entity_id(node_id: str) -> bool:
    return node_id.startswith(ENTITY_ID_PREFIX)


def _singular(word: str) -> str:
    # A matching key, not a lemma: the question's name and every entity name go through the
    # same rule, so only names that differ by a plural ending meet (no lemmatizer runs on the
    # group's entity names at index time).
    if len(word) < 4 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def variant_key(norm: str) -> str:
    """A normalised name with accents folded and every word's plural ending dropped, so
    spelling and number variants of one name share a key ("Aschenbrodel" / "Aschenbrödel",
    "travel request" / "travel requests")."""
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", norm) if not unicodedata.combining(ch))
    return " ".join(_singular(w) for w in folded.split())


# --------------------------------------------------------------------------- own pages

# Group meta written by whatever writes a group's OWN_PAGE edges (the entity_graph index
# step): ``{"edges": n}``. Its absence means the group was indexed before those edges
# existed, and readers must not take "no OWN_PAGE edge" for "no own page".
OWN_PAGES_META = "entities.own_pages"

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


def title_names(title: str) -> list[str]:
    """The names a document title may give its subject, normalised, most literal first: the
    whole title, without a trailing parenthetical ("Brother (Pearl Jam song)"), before its
    first comma ("Dodge City, Kansas"), after its last colon ("Team: Payments")."""
    out = [title, _PARENTHETICAL.sub("", title), title.split(",", 1)[0], title.rsplit(":", 1)[-1]]
    return list(dict.fromkeys(n for n in (normalize_name(t) for t in out) if n))


def own_page_entity(title: str, entities: Container[str]) -> str | None:
    """The entity id whose own page a document titled ``title`` is: the most literal of
    :func:`title_names` that is one of ``entities`` (ids); None when it names none."""
    return next((ENTITY_ID_PREFIX + n for n in title_names(title) if ENTITY_ID_PREFIX + n in entities), None)


@dataclass
class EntityRecord:
    """Everything known about one merged entity: its surface forms and how often each was
    seen, and the chunks (documents) that mention it."""

    norm: str
    surface_counts: Counter[str] = field(default_factory=Counter)
    chunks: set[str] = field(default_factory=set)
    docs: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return ENTITY_ID_PREFIX + self.norm

    @property
    def name(self) -> str:
        """The display name: the most frequent surface form; ties go to the form with
        more capitals (``Paris`` over ``paris``), then to the alphabetically first, so the
        choice never depends on input order."""
        return min(
            self.surface_counts.items(),
            key=lambda kv: (-kv[1], -sum(c.isupper() for c in kv[0]), kv[0]),
        )[0]

    @property
    def aliases(self) -> list[str]:
        """Every surface form seen, sorted."""
        return sorted(self.surface_counts)

    @property
    def mention_count(self) -> int:
        return sum(self.surface_counts.values())


class EntityTable:
    """Merges surface forms into entities by normalised name.

    ``add`` returns the entity id a surface form belongs to, or None when the form
    normalises to nothing (punctuation, a lone article) or is too short to be a name.
    """

    def __init__(self, *, min_chars: int = 2) -> None:
        self.min_chars = min_chars
        self.records: dict[str, EntityRecord] = {}

    def add(
        self,
        surface: str,
        *,
        chunk_id: str | None = None,
        doc_id: str | None = None,
        count: int = 1,
    ) -> str | None:
        surface = " ".join(surface.split())
        norm = normalize_name(surface)
        if len(norm) < self.min_chars:
            return None
        rec = self.records.get(norm)
        if rec is None:
            rec = self.records[norm] = EntityRecord(norm)
        rec.surface_counts[surface] += count
        if chunk_id is not None:
            rec.chunks.add(chunk_id)
        if doc_id is not None:
            rec.docs.add(doc_id)
        return rec.id

    def add_all(
        self, surfaces: Iterable[str], *, chunk_id: str | None = None, doc_id: str | None = None
    ) -> list[str]:
        """Add many forms; the distinct entity ids they map to, in first-seen order."""
        out: list[str] = []
        for s in surfaces:
            eid = self.add(s, chunk_id=chunk_id, doc_id=doc_id)
            if eid is not None and eid not in out:
                out.append(eid)
        return out

    def get(self, entity_id_or_norm: str) -> EntityRecord | None:
        key = entity_id_or_norm.removeprefix(ENTITY_ID_PREFIX)
        return self.records.get(key)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[EntityRecord]:
        return iter(self.records.values())
