"""YAML loading that records the line of every mapping, for error messages that point at the file."""

from __future__ import annotations

from typing import Any

import yaml

# --------------------------------------------------------------------------- YAML with lines

LINE_KEY = "__line__"


class LineLoader(yaml.SafeLoader):
    """SafeLoader that records the 1-based line of every mapping under ``__line__``."""


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping[LINE_KEY] = node.start_mark.line + 1
    return mapping


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_lines(v) for k, v in value.items() if k != LINE_KEY}
    if isinstance(value, list):
        return [strip_lines(v) for v in value]
    return value
