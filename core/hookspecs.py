"""Every hook graphroute calls, in one module.

A plugin is any module or object with functions decorated by :data:`hookimpl` whose names
match the specs below. Built-in plugins (``graphroute.plugins.*``) are registered as default
plugins; third-party packages announce theirs through the ``graphroute`` entry-point group::

    # pyproject.toml of a third-party package
    [project.entry-points.graphroute]
    my_plugin = "my_package.plugin"

All ``register_*`` hooks take no arguments and return a **list of classes** of their
family: subclasses of ``Stage`` with the hook's ``kind`` for the four stage hooks, of
``Loader``, ``Segmenter``, ``Embedder``, ``Extractor``, ``IndexStep``, ``LLMClient`` or
``StoreBackend`` for the others. Each class has a unique ``name`` within its family. The
hooks are called once, when the registry is built (first use of
:func:`graphroute.core.registry.get_registry`).

A plugin is **broken**, and contributes nothing, when it fails to import, when it implements
a hook whose name matches none below (``register_denoiser``: a did-you-mean names the hook it
resembles; mark a hook meant for another plugin's spec ``@hookimpl(optionalhook=True)``), or
when a ``register_*`` hook raises or returns anything but such a list. Every command then
stops with exit code 2 and a message naming the plugin, its entry point and distribution,
what failed and how to go on; ``graphroute plugins`` lists the plugins that loaded and the
broken one. ``GRAPHROUTE_DISABLE_PLUGINS=NAME[,NAME...]`` skips the plugins of those names
(entry points and ``GRAPHROUTE_PLUGINS`` modules), ``GRAPHROUTE_DISABLE_ENTRY_POINTS=1``
every installed one. Two plugins registering the same name is an error that names both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from graphroute.core.api.components import (
        Embedder,
        Extractor,
        IndexStep,
        LLMClient,
        Loader,
        Segmenter,
        StoreBackend,
    )
    from graphroute.core.api.stage import Stage

PROJECT = "graphroute"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------- query stages


@hookspec
def register_seed_sources() -> list[type[Stage]]:  # type: ignore[empty-body]
    """Return seed-source stage classes (``kind = StageKind.SEED_SOURCE``).

    Seed sources turn the question into seeds: entity names, resolved entity nodes,
    structural or thematic seeds, tier weights. Example::

        @hookimpl
        def register_seed_sources():
            return [NerSeeds, SeedResolution]
    """


@hookspec
def register_expanders() -> list[type[Stage]]:  # type: ignore[empty-body]
    """Return expander stage classes (``kind = StageKind.EXPANDER``).

    Expanders produce or grow evidence: vector search, PPR, entity -> chunks, sentence
    windows, graph traversal. Example::

        @hookimpl
        def register_expanders():
            return [ChunkVector]
    """


@hookspec
def register_denoisers() -> list[type[Stage]]:  # type: ignore[empty-body]
    """Return denoiser stage classes (``kind = StageKind.DENOISER``); rerankers are
    denoisers that reorder.

    They consume evidence (or entities) and return less, better-ordered evidence.
    Example::

        @hookimpl
        def register_denoisers():
            return [ScoreGap, SemanticDedup]
    """


@hookspec
def register_synthesizers() -> list[type[Stage]]:  # type: ignore[empty-body]
    """Return synthesizer stage classes (``kind = StageKind.SYNTHESIZER``).

    Synthesizers turn context into the answer and its citations; they answer "not found"
    rather than invent. Example::

        @hookimpl
        def register_synthesizers():
            return [ExtractiveSynthesizer]
    """


# --------------------------------------------------------------------------- index side


@hookspec
def register_loaders() -> list[type[Loader]]:  # type: ignore[empty-body]
    """Return :class:`~graphroute.core.api.components.Loader` classes; each declares the file
    ``extensions`` it reads, and a ``version`` to raise when it starts reading the same file
    differently (documents an older version read are parsed again on the next index run).
    A file it cannot read raises ``LoaderError`` (the file is failed); a part of it left out
    while the rest is read goes to ``self.warn("entry 3: ...")`` (a warning of the run).
    Example: ``return [MarkdownLoader]``."""


@hookspec
def register_segmenters() -> list[type[Segmenter]]:  # type: ignore[empty-body]
    """Return sentence :class:`~graphroute.core.api.components.Segmenter` classes.
    Example: ``return [SpacySegmenter]``."""


@hookspec
def register_embedders() -> list[type[Embedder]]:  # type: ignore[empty-body]
    """Return :class:`~graphroute.core.api.components.Embedder` classes (local model, Voyage,
    OpenAI, ...). Example: ``return [LocalEmbedder]``."""


@hookspec
def register_extractors() -> list[type[Extractor]]:  # type: ignore[empty-body]
    """Return entity/relation :class:`~graphroute.core.api.components.Extractor` classes.
    Example: ``return [SpacyExtractor, ReplayExtractor]``."""


@hookspec
def register_index_steps() -> list[type[IndexStep]]:  # type: ignore[empty-body]
    """Return :class:`~graphroute.core.api.components.IndexStep` classes that run after
    parsing: edge builders (sentence kNN, section similarity), the entity graph,
    communities. Example: ``return [SentenceKnn]``."""


@hookspec
def register_llm_clients() -> list[type[LLMClient]]:  # type: ignore[empty-body]
    """Return :class:`~graphroute.core.api.components.LLMClient` classes.
    Example: ``return [OpenAIChat]``."""


@hookspec
def register_stores() -> list[type[StoreBackend]]:  # type: ignore[empty-body]
    """Return :class:`~graphroute.core.api.components.StoreBackend` classes; the first whose
    ``handles(location)`` is true opens a store location. Example: ``return [Neo4jBackend]``."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``graphroute`` typer app (``cli``), like datasette's
    ``register_commands``. Called once when the CLI starts, for the modules announced under
    the ``graphroute.commands`` entry-point group (not ``graphroute``: starting the CLI
    imports command modules only). Returns nothing. Example::

        @hookimpl
        def register_commands(cli):
            @cli.command()
            def hello():
                print("hello")
    """
