"""Built-in plugins. Each module is registered as a default plugin (``DEFAULT_PLUGINS`` in
:mod:`graphroute.core.registry`), exactly the way a
third-party plugin is registered through the ``graphroute`` entry-point group.

Plugin modules must import heavy or optional libraries (torch, spaCy, neo4j, openai, ...)
inside the functions that need them, so ``graphroute plugins`` stays fast and a missing
optional extra only disables the components that need it.
"""
