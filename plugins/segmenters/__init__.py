"""Built-in segmenters plugins."""
