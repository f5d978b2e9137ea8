"""Built-in denoisers plugins."""
