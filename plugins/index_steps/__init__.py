"""Built-in index steps plugins."""
