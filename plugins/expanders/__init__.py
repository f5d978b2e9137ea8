"""Built-in expanders plugins."""
