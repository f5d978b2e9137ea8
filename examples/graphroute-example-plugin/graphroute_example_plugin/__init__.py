"""Example third-party graphroute plugin (see docs/plugin-authors.md)."""
