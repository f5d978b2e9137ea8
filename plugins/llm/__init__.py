"""Built-in llm plugins."""
