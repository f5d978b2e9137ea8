"""Index profiles: which loader, segmenter, embedder, extractor and index steps build a group, as YAML (``routes/index/``)."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from graphroute.core.config.clients import param_problem
from graphroute.core.errors import IndexProfileError
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

if TYPE_CHECKING:
    from graphroute.core.registry import Family, Registry


class ComponentSpec(BaseModel):
    """``{use: name, with: {...}}`` for one component."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    use: str
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    enabled: bool = True


class ParseSettings(BaseModel):
    """How documents become the skeleton (defaults from the skeleton reference)."""

    model_config = ConfigDict(extra="forbid")

    chunk_max_tokens: int = Field(512, ge=16, description="upper bound of a TextChunk, in whitespace tokens")
    min_sentence_chars: int = Field(12, ge=0, description="shorter sentences are noise (merged or dropped)")
    min_sentence_words: int = Field(3, ge=0, description="sentences with fewer words are merged into a neighbour")
    max_file_mb: float = Field(50.0, gt=0, description="larger files are refused with a clear message")
    label_prefix: bool = Field(
        True,
        description=(
            "label what is embedded with where it stands: a chunk with its `chunk_label`, a sentence embedded "
            "`alone` as `[Document: t | Section: p]` + text; stored text stays raw"
        ),
    )
    chunk_label: Literal["heading", "brackets"] = Field(
        "heading",
        description=(
            "how a TextChunk's embedded text names its place: `heading` puts the section path on a heading "
            "line (`Title > Section` newline text, the usual passage format of dense retrievers); `brackets` "
            "uses the sentence label"
        ),
    )
    cross_chunk_dedup: bool = Field(True, description="drop a sentence already seen in another chunk of the document")
    chunk_sections: Literal["split", "pack"] = Field(
        "split",
        description=(
            "`split`: every section starts a chunk (a short section is a chunk of its own); `pack`: a chunk "
            "holds consecutive paragraphs across sections while they fit in `chunk_max_tokens`, each section "
            "it enters named on a line of its own; sentences keep their own section either way"
        ),
    )
    sentence_vectors: Literal["alone", "in_chunk"] = Field(
        "alone",
        description=(
            "how sentence vectors are made: `alone` embeds each sentence on its own, after its label prefix; "
            "`in_chunk` reads each from its chunk's pass (the mean of its tokens' and the chunk heading's "
            "outputs, in the chunk's context): about half the embedding work, but less precise sentence "
            "vectors (on MuSiQue route1s_sentence loses recall and containment, docs/models.md); embedders without "
            "token outputs always embed `alone`"
        ),
    )


class IndexProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    description: str = ""
    segmenter: ComponentSpec = ComponentSpec(use="spacy")
    embedder: ComponentSpec = ComponentSpec(use="local")
    parse: ParseSettings = ParseSettings()  # type: ignore[call-arg]
    # loaders tried before the built-in ones, in order, with their parameters
    loaders: list[ComponentSpec] = Field(default_factory=list)
    steps: list[ComponentSpec] = Field(default_factory=list)
    _source: Path | None = PrivateAttr(None)  # the file it was read from, for messages


def check_profile(profile: IndexProfile, registry: Registry) -> None:
    """Raise IndexProfileError when an enabled component of ``profile`` (its segmenter,
    embedder, loaders or index steps) is not registered, or its ``with`` does not fit the
    component's parameters: before an index run writes anything, as a route is checked
    before it runs, so a misspelt step is not a group silently built without its layer."""
    entries: list[tuple[str, ComponentSpec, Family[Any]]] = [
        ("segmenter", profile.segmenter, registry.segmenters),
        ("embedder", profile.embedder, registry.embedders),
        *((f"loaders[{k}]", spec, registry.loaders) for k, spec in enumerate(profile.loaders)),
        *((f"steps[{k}]", spec, registry.index_steps) for k, spec in enumerate(profile.steps)),
    ]
    where = str(profile._source) if profile._source else f"index profile {profile.name!r}"
    for place, spec, family in entries:
        if not spec.enabled:
            continue
        if spec.use not in family:
            close = difflib.get_close_matches(spec.use, family.names(), n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise IndexProfileError(
                f"{where}: {place}: unknown {family.title} {spec.use!r}\n  fix: {hint}registered: "
                f"{', '.join(family.names()) or 'none'}; install the plugin that provides it, or set "
                "`enabled: false` on the entry"
            )
        params = family.get(spec.use).Params
        try:
            params(**spec.with_)
        except ValidationError as exc:
            raise IndexProfileError(
                f"{where}: {place}: {param_problem(exc, family.title, spec.use)}\n  fix: parameters of "
                f"`{spec.use}`: {', '.join(params.model_fields) or 'none'}"
            ) from None


def builtin_index_profiles_dir() -> Path:
    return Path(str(resources.files("graphroute.routes"))) / "index"


def load_index_profile(name_or_path: str | None) -> IndexProfile:
    """Load a profile by name (``default``) or path; None means ``default``."""
    name_or_path = name_or_path or "default"
    p = Path(name_or_path)
    if not p.is_file():
        p = builtin_index_profiles_dir() / f"{name_or_path}.yaml"
    if not p.is_file():
        known = sorted(f.stem for f in builtin_index_profiles_dir().glob("*.yaml"))
        raise IndexProfileError(
            f"unknown index profile {name_or_path!r}\n  fix: use one of the shipped profiles "
            f"({', '.join(known)}) or the path of a profile YAML file"
        )
    from graphroute.core.config.yaml_lines import LineLoader, strip_lines

    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=LineLoader)  # a SafeLoader subclass
    except (OSError, UnicodeDecodeError) as exc:
        raise IndexProfileError(f"{p}: cannot read index profile: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise IndexProfileError(f"{where}: malformed YAML: {problem}\n  fix: fix the YAML syntax") from None
    try:
        profile = IndexProfile.model_validate(strip_lines(data))
    except ValidationError as exc:
        raise IndexProfileError(_explain_profile_error(p, data, exc)) from None
    profile._source = p
    return profile


def _explain_profile_error(path: Path, data: Any, exc: ValidationError) -> str:
    """``file:line: `parse.max_file_mb`: <problem> (got -1)`` plus the valid fields, like
    route config errors (pydantic's own text is long and ends in a URL)."""
    from graphroute.core.config.yaml_lines import LINE_KEY, strip_lines

    err = exc.errors()[0]
    loc = [str(x) for x in err["loc"]]
    line, node = None, data
    for part in err["loc"]:
        if isinstance(node, dict) and LINE_KEY in node:
            line = node[LINE_KEY]
        found = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if not found:
            break
        node = node[part]
    if isinstance(node, dict) and LINE_KEY in node:
        line = node[LINE_KEY]
    where = f"{path}:{line}" if line else str(path)
    got = "" if err["type"] == "missing" else f" (got {strip_lines(err.get('input'))!r})"
    if loc[:1] == ["parse"]:
        section, fields = "parse settings", ", ".join(ParseSettings.model_fields)
    elif loc[:1] in (["steps"], ["loaders"], ["segmenter"], ["embedder"]) and len(loc) > 1:
        section, fields = f"each entry of `{loc[0]}` has", "use, with, enabled"
    else:
        section, fields = "index profile fields", ", ".join(IndexProfile.model_fields)
    more = f" ({len(exc.errors()) - 1} more problem(s) after this one)" if len(exc.errors()) > 1 else ""
    return (
        f"{where}: invalid index profile: `{'.'.join(loc) or '(top level)'}`: {err['msg']}{got}{more}\n"
        f"  fix: {section}: {fields}; routes/index/default.yaml shows each with its default"
    )
