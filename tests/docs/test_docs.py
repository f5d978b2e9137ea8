"""The docs site: generated reference pages are current and complete, and the strict build
fails on a broken link."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.apps import docgen
from graphroute.core.config.route import builtin_routes_dir

from tests.playground.conftest import browser  # noqa: F401  (the Chromium fixture)
from tests.playground.test_browser import shot

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = ROOT / docgen.DEFAULT_OUT
MKDOCS = str(Path(sys.executable).parent / "mkdocs")


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return docgen.render_all()


def test_generated_pages_are_up_to_date(pages: dict[str, str]) -> None:
    stale = docgen.stale_pages(REFERENCE, pages)
    assert not stale, (
        f"stale generated docs: {stale}; regenerate with `.venv/bin/python -m graphroute.core.apps.docgen` "
        "(or `make docs`) and commit docs/pages/reference"
    )


def test_generation_is_deterministic(pages: dict[str, str]) -> None:
    assert docgen.render_all() == pages


def test_stale_pages_are_detected_and_rewritten(pages: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "reference"
    assert docgen.write_pages(out, pages) == sorted(pages)
    assert docgen.stale_pages(out, pages) == []
    (out / "stages.md").write_text("old", encoding="utf-8")
    (out / "routes" / "removed_route.md").write_text("gone", encoding="utf-8")
    assert docgen.main(["--out", str(out), "--check"]) == 1
    assert docgen.stale_pages(out, pages) == []
    assert not (out / "routes" / "removed_route.md").exists()
    assert docgen.main(["--out", str(out), "--check"]) == 0


def test_every_stage_and_component_is_catalogued(pages: dict[str, str]) -> None:
    registry = docgen.docs_registry()
    for name, entry in registry.stages.entries.items():
        assert f"\n### {name}\n\n{entry.cls.describe()}\n" in pages["stages.md"]
        for param, field in entry.cls.Params.model_fields.items():
            assert f"| `{param}` |" in pages["stages.md"], (name, param)
            assert field.description, f"stage {name}: parameter {param} has no description"
    for family in (registry.loaders, registry.embedders, registry.index_steps, registry.stores):
        for name in family.names():
            assert f"\n### {name}\n" in pages["components.md"]


def test_every_shipped_route_has_a_page_with_a_diagram(pages: dict[str, str]) -> None:
    for path in builtin_routes_dir().glob("*.yaml"):
        page = pages[f"routes/{path.stem}.md"]
        assert "```mermaid\nflowchart TD" in page
        assert f"[`{path.stem}`]({path.stem}.md)" in pages["routes/index.md"]
        route = docgen.load_route(str(path), docgen.docs_registry(), environ={})
        for rs in route.stages():
            assert f"| `{rs.spec.key}` |" in page
            label = rs.spec.key if rs.spec.key == rs.cls.name else f"{rs.spec.key} ({rs.cls.name})"
            assert f'["{label}<br/>' in page


def test_every_config_field_is_documented(pages: dict[str, str]) -> None:
    for model in docgen.MODELS_DOCUMENTED:
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            key = field.alias or name
            assert field.description or (model, key) in docgen.FIELD_NOTES, f"{model.__name__}.{key} is undocumented"
            assert f"| `{key}` |" in pages["route-config.md"]


def test_every_hook_is_in_the_hook_reference(pages: dict[str, str]) -> None:
    from graphroute.core import hookspecs

    names = [n for n in dir(hookspecs) if n.startswith("register_")]
    assert names
    for name in names:
        assert f"## {name}\n" in pages["hooks.md"]


def copy_docs(tmp_path: Path) -> Path:
    target = tmp_path / "docs"
    shutil.copytree(DOCS, target, ignore=shutil.ignore_patterns("site", "__pycache__"))
    return target


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [MKDOCS, "build", "--strict", "-f", str(config), "--site-dir", str(site)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )


def test_strict_build_passes_and_fails_on_a_broken_link(tmp_path: Path) -> None:
    docs = copy_docs(tmp_path)
    ok = build(docs / "mkdocs.yml", tmp_path / "site-ok")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "site-ok" / "reference" / "stages" / "index.html").is_file()
    assert (tmp_path / "site-ok" / "models" / "index.html").is_file()  # served by hooks.py
    plugin_page = (tmp_path / "site-ok" / "plugin-authors" / "index.html").read_text(encoding="utf-8")
    assert "min_length" in plugin_page  # the example plugin's code is included, not copied

    page = docs / "pages" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8")
    broken = build(docs / "mkdocs.yml", tmp_path / "site-broken")
    assert broken.returncode != 0
    assert "no-such-page.md" in broken.stderr + broken.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site, served over a loopback port."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    tmp = tmp_path_factory.mktemp("site")
    built = build(copy_docs(tmp) / "mkdocs.yml", tmp / "site")
    assert built.returncode == 0, built.stderr
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp / "site"))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def test_nav_separates_guides_reference_and_measurements(site: str) -> None:
    import httpx

    html = httpx.get(f"{site}/", timeout=30).text
    sections = [s for s in ("User guides", "Reference", "Measurements") if s in html]
    assert sections == ["User guides", "Reference", "Measurements"]
    assert html.index("Managing the index") < html.index("Stage catalog") < html.index("Benchmarking")


def test_route_diagram_renders_offline_and_stage_ids_stay_whole(site: str, browser: Any) -> None:  # noqa: F811
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    outside: list[str] = []

    def only_the_site(route: Any) -> None:
        if route.request.url.startswith(site):
            route.continue_()
        else:  # no network: a CDN request is refused and recorded
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_site)
    # mkdocs-material draws each diagram in a closed shadow root; opened, the test can read it
    page.add_init_script("""const attach = Element.prototype.attachShadow;
        Element.prototype.attachShadow = function (options) { return attach.call(this, {...options, mode: 'open'}); };""")
    try:
        page.goto(f"{site}/reference/routes/route2_local/")
        page.wait_for_selector(".mermaid svg", timeout=60_000)
        labels = page.locator(".mermaid svg").first.text_content() or ""
        assert "community_filter" in labels and "ppr" in labels and "answer + citations" in labels
        assert outside == [], outside
        # every stage id in the stage table is on one line
        broken = page.evaluate("""() => [...document.querySelectorAll('.md-typeset table td:first-child code')]
            .filter(c => c.getClientRects().length > 1 || c.offsetHeight > 2 * parseFloat(getComputedStyle(c).lineHeight))
            .map(c => c.textContent)""")
        codes = page.evaluate("() => document.querySelectorAll('.md-typeset table td:first-child code').length")
        assert codes >= 10 and broken == [], broken
        page.set_viewport_size({"width": 420, "height": 900})  # a phone: the table scrolls, ids stay whole
        assert page.evaluate("""() => [...document.querySelectorAll('.md-typeset table td:first-child code')]
            .filter(c => c.getClientRects().length > 1).length""") == 0
        page.set_viewport_size({"width": 1280, "height": 900})
        page.evaluate("() => window.scrollTo(0, 0)")
        shot(page, "route-diagram.png")
    finally:
        page.close()


def _yaml_examples() -> list[tuple[str, str]]:
    """Every ```yaml block of the README and the guides, dedented (a block inside an
    admonition is indented), with where it stands."""
    import re
    import textwrap

    blocks = []
    for path in [ROOT / "README.md", *sorted((DOCS / "pages").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^([ \t]*)```yaml\n(.*?)^\1```", text, re.S | re.M):
            line = text.count("\n", 0, m.start()) + 1
            blocks.append((f"{path.relative_to(ROOT)}:{line}", textwrap.dedent(m.group(2))))
    return blocks


@pytest.mark.parametrize("where, text", _yaml_examples(), ids=lambda v: v if ":" in str(v) and "\n" not in str(v) else "")
def test_route_and_profile_examples_in_the_docs_load(where: str, text: str, tmp_path: Path) -> None:
    """A route example resolves against today's routes and stages (a patch names a stage the
    parent has, `after:` a top-level one); a named index profile names registered components
    with parameters they take."""
    import yaml
    from graphroute.core.config.index_profile import check_profile, load_index_profile
    from graphroute.core.config.resolve import load_route
    from graphroute.core.registry import get_registry

    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "name" not in data:
        pytest.skip(f"{where}: a fragment, not a whole route or profile")
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(text, encoding="utf-8")
    if "stages" in data:
        load_route(str(path), get_registry())
    else:
        check_profile(load_index_profile(str(path)), get_registry())
