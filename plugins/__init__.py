"""Built-in plugins. Each module below is registered as a default plugin, exactly the way a
third-party plugin is registered through the ``graphroute`` entry-point group.

Plugin modules must import heavy or optional libraries (torch, spaCy, neo4j, openai, ...)
inside the functions that need them, so ``graphroute plugins`` stays fast and a missing
optional extra only disables the components that need it.
"""

BUILTIN_PLUGINS: tuple[str, ...] = (
    # index side
    "graphroute.plugins.loaders.files",
    "graphroute.plugins.segmenters.spacy_segmenter",
    "graphroute.plugins.embedders.local",
    "graphroute.plugins.embedders.remote",
    "graphroute.plugins.index_steps.skeleton",
    "graphroute.plugins.extractors.builtin",
    "graphroute.plugins.graph_builders.entity_graph",
    "graphroute.plugins.stores.embedded",
    "graphroute.plugins.stores.neo4j_store",
    "graphroute.plugins.llm.openai_chat",
    # query side
    "graphroute.plugins.seeds.entity_seeds",
    "graphroute.plugins.seeds.tiers",
    "graphroute.plugins.expanders.graph",
    "graphroute.plugins.expanders.vector",
    "graphroute.plugins.denoisers.route2",
    "graphroute.plugins.denoisers.skeleton",
    "graphroute.plugins.denoisers.context",
    "graphroute.plugins.denoisers.rerank_remote",
    "graphroute.plugins.synthesizers.builtin",
    "graphroute.plugins.baselines.lexical",
)
