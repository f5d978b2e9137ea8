"""Built-in stores plugins."""
