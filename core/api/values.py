"""Parsing of user-given values that every entry point shares: booleans, and how a message
repeats a value it refuses (:func:`echo`).

One rule everywhere (route YAML, ``--set``, ``GRAPHROUTE__ID__ENABLED``, API overrides,
``GRAPHROUTE_*`` switches): ``true``/``false``, ``1``/``0``, ``yes``/``no`` (any case), or a
real boolean; anything else is an error, never "on because the string is not empty".
"""

from __future__ import annotations

import os
import reprlib
from typing import Any

from graphroute.core.errors import BadBooleanError
from pydantic import BaseModel

# the longest piece of a user's value an error message repeats: a message says what is wrong
# with a value, it does not send a request's megabytes back (nor expand a YAML alias chain)
ECHO_CHARS = 80
# stage ids and parameter names in overrides: the longest a route's own ids reasonably are
MAX_NAME_CHARS = 128
# how deeply a value given in an override (JSON or YAML) may nest: a stage's parameters are
# a few levels deep; deeper input only makes the recursive copy and validation fail
MAX_VALUE_DEPTH = 32

TRUE_WORDS = frozenset({"true", "1", "yes"})
FALSE_WORDS = frozenset({"false", "0", "no"})


def parse_bool(value: Any, what: str = "value") -> bool:
    """``value`` as a boolean, or :class:`BadBooleanError` (a user error, exit 2 / HTTP 400)
    naming ``what``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise BadBooleanError(f"{what} must be true/false, 1/0 or yes/no, not {echo(value, quote=True)}")


def echo(value: Any, limit: int = ECHO_CHARS, *, quote: bool = False) -> str:
    """A short prefix of ``value`` for a message: a string as it is (``quote``: as its repr)
    cut to ``limit`` characters with its full length after it; anything else as a repr whose
    long parts and nested containers are cut short (never expanded in full)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value) if quote else value
        head = value[:limit]
        return f"{repr(head) if quote else head}... ({len(value):,} characters)"
    short = reprlib.Repr()
    short.maxstring = short.maxother = short.maxlong = limit
    short.maxlevel = 3
    text = short.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def too_deep(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """Whether ``value`` nests lists and mappings more than ``limit`` levels deep (walked
    level by level, without recursion, and only as far as the limit)."""
    containers = dict | list | tuple
    level: list[Any] = [value] if isinstance(value, containers) else []
    for _ in range(limit):
        level = [
            child for item in level for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, containers)
        ]
        if not level:
            return False
    return bool(level)


def env_flag(name: str, default: bool = False) -> bool:
    """The boolean environment switch ``name``; unset or empty means ``default``."""
    raw = os.environ.get(name, "")
    return default if not raw.strip() else parse_bool(raw, name)


def strict_booleans(model: type[BaseModel], data: Any) -> Any:
    """``data`` with the text values of ``model``'s boolean fields parsed by the one boolean
    rule (pydantic alone would also take "on", "t" or "y")."""
    if not isinstance(data, dict):
        return data
    out = data
    for name, info in model.model_fields.items():
        if info.annotation not in (bool, bool | None):
            continue
        key = name if name in data else info.alias
        if key is None or key not in data or not isinstance(data[key], str):
            continue
        if out is data:
            out = dict(data)
        try:
            out[key] = parse_bool(data[key], f"`{name}`")
        except BadBooleanError as exc:  # pydantic reports a ValueError as a validation error
            raise ValueError(str(exc)) from None
    return out
