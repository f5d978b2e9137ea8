"""Built-in seeds plugins."""
