"""Built-in loaders plugins."""
