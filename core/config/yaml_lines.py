"""YAML loading that records the line of every mapping, for error messages that point at the
file, and the bounded loading of YAML a request sends (no aliases, a limited depth)."""

from __future__ import annotations

from typing import Any

import yaml
from graphroute.core.api.values import MAX_VALUE_DEPTH
from graphroute.core.errors import RouteConfigError

# --------------------------------------------------------------------------- YAML with lines

LINE_KEY = "__line__"


class LineLoader(yaml.SafeLoader):
    """SafeLoader that records the 1-based line of every mapping under ``__line__``."""


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping[LINE_KEY] = node.start_mark.line + 1
    return mapping


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Bounded(yaml.SafeLoader):
    """A loader for YAML a client sends (an override value, a pasted route): an alias is
    refused, since a chain of them expands a few hundred bytes into gigabytes once the value
    is copied or printed, and so is nesting deeper than MAX_VALUE_DEPTH, which the parser
    would otherwise follow until it runs out of stack (and scan in quadratic time first)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.AliasEvent):
            raise RouteConfigError("YAML aliases (*name) are not accepted here", line=line, fix="write the values out")
        if self._depth >= MAX_VALUE_DEPTH:
            raise RouteConfigError(
                f"the YAML nests more than {MAX_VALUE_DEPTH} levels deep", line=line,
                fix="a stage's parameters are a few levels deep; write the value flatter",
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1


class BoundedLoader(_Bounded):
    """SafeLoader for a value a request sends: no aliases, at most MAX_VALUE_DEPTH deep."""


class BoundedLineLoader(_Bounded, LineLoader):
    """:class:`LineLoader` for a route file a request sends: no aliases, at most MAX_VALUE_DEPTH deep."""


def strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_lines(v) for k, v in value.items() if k != LINE_KEY}
    if isinstance(value, list):
        return [strip_lines(v) for v in value]
    return value
