"""Tests of the engine: config, overrides, registry, runner, trace."""
