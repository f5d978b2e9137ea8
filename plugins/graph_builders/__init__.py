"""Built-in graph builders plugins."""
