"""mkdocs hooks: serve the pages that sit next to mkdocs.yml, list every route page in the nav.

Pages written alongside other parts of the project (``docs/models.md`` by the model-service
work, ``docs/benchmarking.md`` by the benchmark work) live at the top of ``docs/`` where
their authors keep them; mkdocs cannot use the config file's own folder as ``docs_dir``, so
this hook serves them as if they were in ``pages/`` (same URLs, same relative links).

The "Shipped routes" nav section is filled from the generated ``pages/reference/routes/``
pages, so a new shipped route appears in the nav without editing mkdocs.yml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
NOT_PAGES = {"README.md"}  # explains the folder to people browsing the repository
ROUTES_SECTION = "Shipped routes"
ROUTES_DIR = "reference/routes"


def on_config(config: Any) -> Any:
    pages = Path(config["docs_dir"]) / ROUTES_DIR
    for i, item in enumerate(config["nav"] or []):
        if isinstance(item, dict) and ROUTES_SECTION in item:
            routes = sorted(p.stem for p in pages.glob("*.md") if p.stem != "index")
            item = {ROUTES_SECTION: [f"{ROUTES_DIR}/index.md", *({r: f"{ROUTES_DIR}/{r}.md"} for r in routes)]}
            config["nav"][i] = item
    return config


def on_files(files: Files, config: Any) -> Files:
    for path in sorted(HERE.glob("*.md")):
        if path.name in NOT_PAGES or files.get_file_from_path(path.name) is not None:
            continue
        files.append(File.generated(config, path.name, abs_src_path=str(path)))
    return files
