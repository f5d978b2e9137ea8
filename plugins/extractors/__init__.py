"""Built-in extractors plugins."""
