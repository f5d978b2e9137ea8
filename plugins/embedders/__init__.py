"""Built-in embedders plugins."""
