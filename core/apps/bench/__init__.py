"""``graphroute bench``, ``ab`` and ``ablate``: retrieval quality, measured."""
