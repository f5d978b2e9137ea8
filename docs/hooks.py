"""mkdocs hooks: serve the pages that sit next to mkdocs.yml, list every route page in the nav.

Pages written alongside other parts of the project (``docs/models.md`` by the model-service
work, ``docs/benchmarking.md`` by the benchmark work) live at the top of ``docs/`` where
their authors keep them; mkdocs cannot use the config file's own folder as ``docs_dir``, so
this hook serves them as if they were in ``pages/`` (same URLs, same relative links).

The "Shipped routes" nav section is filled from the generated ``pages/reference/routes/``
pages, so a new shipped route appears in the nav without editing mkdocs.yml.

The route diagrams are Mermaid. mkdocs-material loads Mermaid from a CDN unless the page
already defines it, so the site ships its own copy (``js/mermaid.min.js``, listed in
``extra_javascript``): the file of the npm package ``mermaid`` (MIT), fetched once with
``npm pack`` into ``docs/.assets/`` (git-ignored). The site then renders its diagrams with
no network.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
NOT_PAGES = {"README.md"}  # explains the folder to people browsing the repository
ROUTES_SECTION = "Shipped routes"
ROUTES_DIR = "reference/routes"
# mkdocs-material's diagram support is written against Mermaid 11 (it names mermaid@11).
MERMAID_VERSION = "11.12.0"
MERMAID_JS = "js/mermaid.min.js"
ASSETS = HERE / ".assets"


def _fill_routes(nav: list[Any], pages: Path) -> None:
    """Replace the ``Shipped routes`` section, wherever it sits in the nav, by every route page."""
    for i, item in enumerate(nav):
        if not isinstance(item, dict):
            continue
        if ROUTES_SECTION in item:
            routes = sorted(p.stem for p in pages.glob("*.md") if p.stem != "index")
            nav[i] = {ROUTES_SECTION: [f"{ROUTES_DIR}/index.md", *({r: f"{ROUTES_DIR}/{r}.md"} for r in routes)]}
            continue
        for value in item.values():
            if isinstance(value, list):
                _fill_routes(value, pages)


def on_config(config: Any) -> Any:
    _fill_routes(config["nav"] or [], Path(config["docs_dir"]) / ROUTES_DIR)
    return config


def mermaid_js() -> Path:
    """The pinned ``mermaid.min.js``, fetched from the npm registry the first time."""
    target = ASSETS / f"mermaid-{MERMAID_VERSION}.min.js"
    if target.is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise PluginError(f"the docs need npm once to fetch mermaid {MERMAID_VERSION} (apt-get install -y npm)")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([npm, "pack", f"mermaid@{MERMAID_VERSION}", "--silent", "--pack-destination", tmp],
                             capture_output=True, text=True, timeout=600)
        packed = sorted(Path(tmp).glob("mermaid-*.tgz"))
        if run.returncode != 0 or not packed:
            raise PluginError(f"npm pack mermaid@{MERMAID_VERSION} failed: {run.stderr.strip()[-500:]}")
        with tarfile.open(packed[0]) as tar:
            member = tar.extractfile("package/dist/mermaid.min.js")
            if member is None:
                raise PluginError(f"mermaid@{MERMAID_VERSION} has no dist/mermaid.min.js")
            data = member.read()
    ASSETS.mkdir(exist_ok=True)
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def on_files(files: Files, config: Any) -> Files:
    for path in sorted(HERE.glob("*.md")):
        if path.name in NOT_PAGES or files.get_file_from_path(path.name) is not None:
            continue
        files.append(File.generated(config, path.name, abs_src_path=str(path)))
    files.append(File.generated(config, MERMAID_JS, abs_src_path=str(mermaid_js())))
    return files
