"""The CLI turns config problems into exit code 2 and one clear message, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRAPHROUTE = str(Path(sys.executable).with_name("graphroute"))


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "GRAPHROUTE_PLUGINS": "tests.engine.stages", **(env or {})}
    return subprocess.run([GRAPHROUTE, *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=120)


ROUTE = """
name: cli_route
stages:
  - use: t_fixed
    id: fixed
  - use: t_keep
    id: keep
  - use: t_echo
    id: synth
"""


@pytest.fixture()
def route_file(tmp_path: Path) -> Path:
    p = tmp_path / "cli_route.yaml"
    p.write_text(textwrap.dedent(ROUTE).lstrip(), encoding="utf-8")
    return p


def test_routes_show_prints_resolved_yaml_with_overrides(route_file: Path) -> None:
    r = run_cli("routes", "show", str(route_file), "--set", "keep.n=2", "--disable", "synth")
    assert r.returncode == 0, r.stderr
    assert "n: 2" in r.stdout and "threshold: 0.0" in r.stdout  # defaults filled in
    assert "enabled: false" in r.stdout


@pytest.mark.parametrize(
    ("mutation", "needle"),
    [
        (("use: t_keep", "use: t_nope"), "unknown stage `t_nope`"),
        (("id: keep", "id: keep\n    with: {bogus: 1}"), "unknown parameter `bogus`"),
        (("id: keep", "id: keep\n    with: {n: lots}"), "bad value for `n`"),
        (("use: t_fixed\n    id: fixed\n  - use: t_keep", "use: t_keep\n    id: fixed\n  - use: t_fixed"), "needs `evidence`"),
        (("stages:", "stages: [oops"), "malformed YAML"),
    ],
)
def test_config_errors_exit_2_without_traceback(route_file: Path, mutation: tuple[str, str], needle: str) -> None:
    route_file.write_text(route_file.read_text().replace(*mutation), encoding="utf-8")
    r = run_cli("routes", "show", str(route_file))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert str(route_file) in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_extends_cycle_exits_2(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: a\nextends: b\nstages: []\n")
    (tmp_path / "b.yaml").write_text("name: b\nextends: a\nstages: []\n")
    r = run_cli("routes", "show", str(tmp_path / "a.yaml"))
    assert r.returncode == 2 and "`extends` cycle" in r.stderr and "Traceback" not in r.stderr


def test_override_of_unknown_stage_id_exits_2(route_file: Path) -> None:
    r = run_cli("routes", "show", str(route_file), "--disable", "kepp")
    assert r.returncode == 2 and "did you mean 'keep'" in r.stderr and "Traceback" not in r.stderr


def test_unknown_route_name_exits_2() -> None:
    r = run_cli("routes", "show", "no_such_route_anywhere")
    assert r.returncode == 2 and "unknown route" in r.stderr


def test_routes_lists_user_routes_from_env(route_file: Path) -> None:
    r = run_cli("routes", env={"GRAPHROUTE_ROUTES": str(route_file.parent), "COLUMNS": "200"})
    assert r.returncode == 0 and "cli_route" in r.stdout


@pytest.mark.parametrize("args, needle", [
    (("query",), "Missing argument 'QUESTION'"),
    (("index", "--bogus"), "No such option: --bogus"),
    (("query", "q", "--route"), "requires an argument"),
])
def test_usage_errors_exit_2_with_the_usage_line(args: tuple[str, ...], needle: str) -> None:
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr
    assert "GRAPHROUTE_DEBUG" not in r.stderr  # not reported as an internal error


def test_query_warns_of_an_override_that_changes_nothing(route_file: Path, tmp_path: Path) -> None:
    route_file.write_text(route_file.read_text().replace("id: keep", "id: keep\n    enabled: false"), encoding="utf-8")
    r = run_cli("query", "q", "--route", str(route_file), "--set", "keep.n=2", "--disable", "keep",
                "--set", "fixed.n=4", "--store", str(tmp_path / "none"))
    assert "keep is disabled in cli_route: --set keep.n=2 changes nothing; add --enable keep" in r.stderr
    assert "keep is already disabled in cli_route: --disable keep changes nothing" in r.stderr
    assert "fixed.n=4" not in r.stderr  # a change that does something is not warned about


@pytest.mark.parametrize("command", [("stats", "--group", "g"), ("index", "docs", "--group", "g")])
def test_a_store_location_no_backend_takes_exits_2_naming_the_ones_that_do(command: tuple[str, ...], tmp_path: Path) -> None:
    # the Neo4j browser's address where its Bolt one belongs: the user's to fix, not an internal error
    r = run_cli(*command, "--store", "http://127.0.0.1:7474", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "no store backend handles 'http://127.0.0.1:7474'" in r.stderr
    assert "bolt://" in r.stderr and "--store" in r.stderr
    assert "GRAPHROUTE_DEBUG" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("location", ["127.0.0.1:7687", "localhost:7687", "[::1]:7687"])
def test_a_server_address_without_its_scheme_is_not_made_a_folder(location: str, tmp_path: Path) -> None:
    # `--store 127.0.0.1:7687` meant the Neo4j server: indexing into a new local folder of that
    # name instead would look like a move to the server that never happened
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nThe ferry leaves at noon.\n", encoding="utf-8")
    for command in (("index", "docs", "--group", "g"), ("stats", "--group", "g")):
        r = run_cli(*command, "--store", location, cwd=tmp_path)
        assert r.returncode == 2, (command, r.returncode, r.stderr)
        assert "looks like a server's address without its scheme" in r.stderr and "bolt://" in r.stderr
        assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no store folder made
    r = run_cli("stats", "--group", "g", "--store", "neo4j", cwd=tmp_path, env={"NEO4J_URI": location})
    assert r.returncode == 2 and "NEO4J_URI" in r.stderr, r.stderr


def test_a_folder_named_like_an_address_that_exists_is_still_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.core.engine import open_store

    monkeypatch.chdir(tmp_path)
    (tmp_path / "host:7687").mkdir()
    store = open_store("host:7687")
    try:
        assert store.backend == "embedded"
    finally:
        store.close()


def _unwound() -> Exception:
    """What a library stopped by Ctrl+C inside a read may raise while unwinding: its own
    error, with the KeyboardInterrupt as its context (the Neo4j driver: a BufferError)."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise BufferError("Existing exports of data: object cannot be re-sized")  # noqa: B904
    except BufferError as exc:
        return exc


def test_an_error_raised_while_ctrl_c_unwinds_is_an_interruption() -> None:
    from graphroute.core.apps.cli.main import interrupted, on_interrupt
    from graphroute.core.errors import EXIT_INTERRUPTED, IndexCancelled, exit_code_for

    unwound = _unwound()
    assert interrupted(unwound) and interrupted(KeyboardInterrupt()) and not interrupted(BufferError("x"))
    with pytest.raises(IndexCancelled, match="run it again") as stopped, on_interrupt("run it again"):
        raise unwound
    assert exit_code_for(stopped.value) == EXIT_INTERRUPTED
    with pytest.raises(BufferError), on_interrupt("run it again"):  # an error of its own stays what it is
        raise BufferError("x")
