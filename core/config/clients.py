"""Components made from configuration: a registered class plus its validated parameters, and
the LLM client that ``GRAPHROUTE_LLM`` names (or ``GRAPHROUTE_LLM_MODEL`` alone: the
``openai`` client for that model)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from graphroute.core.api.components import Component, ComponentParams, LLMClient
from graphroute.core.api.values import echo
from graphroute.core.config.settings import Settings, env_json
from graphroute.core.errors import ConfigError, LLMConfigError
from graphroute.core.registry import Registry
from pydantic import ValidationError

ENV_LLM = "GRAPHROUTE_LLM"
ENV_LLM_PARAMS = "GRAPHROUTE_LLM_PARAMS"
ENV_LLM_MODEL = "GRAPHROUTE_LLM_MODEL"


def make_component(registry_family: Any, spec: dict[str, Any]) -> Any:
    """Instantiate ``{"use": name, "with": {...}}`` from a registry family."""
    cls = registry_family.get(spec["use"])
    params = cls.Params(**(spec.get("with") or {}))
    return cls(params)


def llm_params_from_env(environ: dict[str, str] | None = None) -> tuple[str | None, dict[str, object]]:
    """(client name, params) from ``GRAPHROUTE_LLM`` / ``GRAPHROUTE_LLM_PARAMS`` /
    ``GRAPHROUTE_LLM_MODEL``; name None means "offline"."""
    env = os.environ if environ is None else environ
    name = _client_name(env)
    if not name or name.lower() in ("none", "off", "0", "false"):
        return None, {}
    params = env_json(ENV_LLM_PARAMS, env, LLMConfigError)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise LLMConfigError(f"{ENV_LLM_PARAMS} must be a JSON object, e.g. '{{\"model\": \"gpt-4.1-mini\"}}'")
    model = env.get(ENV_LLM_MODEL, "").strip()
    if model and "model" not in params:
        params["model"] = model
    return name, params


def _client_name(env: Mapping[str, str]) -> str:
    """``GRAPHROUTE_LLM``, or ``openai`` when only ``GRAPHROUTE_LLM_MODEL`` names a model."""
    name = env.get(ENV_LLM, "").strip()
    if not name and env.get(ENV_LLM_MODEL, "").strip():
        return "openai"
    return name


def component_params(
    cls: type[Component], given: Mapping[str, Any], what: str, error: type[ConfigError] = ConfigError
) -> ComponentParams:
    """``cls.Params`` of ``given``, a bad key or value raised as ``error``: which ``what``
    (e.g. "LLM client 'openai'"), what is wrong, and the parameters it knows."""
    try:
        return cls.Params(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        fields = ", ".join(cls.Params.model_fields)
        raise error(f"{what}: invalid parameters ({problems}); known parameters: {fields}") from None


def param_problem(exc: ValidationError, kind: str, name: str) -> str:
    """The first problem of ``exc`` (raised by a component's ``Params``) in one phrase that
    names the parameter and the component: "unknown parameter `x` for stage `y`", or "bad
    value for `x` of stage `y`: <why> (got <value>)"; routes and index profiles word it alike."""
    err = exc.errors()[0]
    param = echo(".".join(str(p) for p in err["loc"]) or "?")
    if err["type"] == "extra_forbidden":
        return f"unknown parameter `{param}` for {kind} `{name}`"
    if err["type"] == "missing":
        return f"missing required parameter `{param}` for {kind} `{name}`"
    return f"bad value for `{param}` of {kind} `{name}`: {echo(err['msg'], 300)} (got {echo(err.get('input'), quote=True)})"


def make_llm(registry: Registry, name: str, params: dict[str, object]) -> LLMClient:
    """Instantiate a registered LLM client, turning bad parameters into a clear error."""
    cls = registry.llm_clients.get(name)  # unknown name: PluginError listing the known ones
    return cls(component_params(cls, params, f"LLM client {name!r}", LLMConfigError))


def llm_factory(settings: Settings, registry: Registry) -> Callable[[], LLMClient | None]:
    """A zero-argument factory, called lazily on first use (so an offline route never
    imports the openai SDK)."""

    def make() -> LLMClient | None:
        name, params = llm_params_from_env()
        if name is None:
            return None
        return make_llm(registry, name, params)

    return make
