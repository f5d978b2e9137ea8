"""Built-in synthesizers plugins."""
