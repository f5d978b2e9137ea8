"""Helpers plugins may use: top-k selection, kNN tables, entity names, graph views of a store,
embedding and LLM caches, LLM retries and JSON parsing, progress bars, indexing phases, page
layout (where cited text sits on its page)."""
