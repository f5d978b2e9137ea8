"""The kernel's shape: what importing a piece of it loads, and what plugins may import."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    """Module names loaded by a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_stage_api_loads_no_config_engine_or_plugin_module() -> None:
    loaded = _modules_after("import graphroute.core.api.stage")
    ours = {m for m in loaded if m.startswith("graphroute")}
    assert "graphroute.core.api.stage" in ours
    forbidden = [m for m in ours if m.startswith(("graphroute.plugins", "graphroute.core.config", "graphroute.core.engine",
                                                   "graphroute.core.query", "graphroute.core.index", "graphroute.core.apps",
                                                   "graphroute.core.registry"))]
    assert forbidden == []


def test_cli_help_and_routes_import_no_plugin_torch_or_spacy() -> None:
    for argv in (["--help"], ["routes"]):
        code = (
            "import sys\nfrom graphroute.core.apps.cli.main import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        )
        loaded = _modules_after(code)
        assert "graphroute.core.apps.cli.commands" in loaded  # the commands did register
        heavy = [m for m in loaded if m.startswith(("graphroute.plugins", "torch", "spacy", "transformers"))]
        assert heavy == [], (argv, heavy)


def _imports_of(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module or "", a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names]


def test_plugins_never_import_another_plugins_private_names() -> None:
    offenders = []
    for path in (ROOT / "plugins").rglob("*.py"):
        family = path.relative_to(ROOT / "plugins").parts[0]
        for module, name in _imports_of(path):
            if not module.startswith("graphroute.plugins."):
                continue
            other_family = module.split(".")[2]
            if other_family != family and name.startswith("_"):
                offenders.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    assert offenders == []


def test_one_error_hierarchy() -> None:
    """Every exception class the kernel and plugins define derives from GraphRouteError."""
    from graphroute.core.errors import GraphRouteError

    loose = []
    for folder in ("core", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.ClassDef)
                    and any(isinstance(b, ast.Name) and b.id in ("Exception", "RuntimeError", "ValueError") for b in node.bases)
                    and node.name != GraphRouteError.__name__
                ):
                    loose.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert loose == []
