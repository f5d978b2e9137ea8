"""Built-in baselines plugins."""
