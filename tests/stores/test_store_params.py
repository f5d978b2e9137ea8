"""Store backend parameters from GRAPHROUTE_STORE_PARAMS (Settings.store_params): each
backend opens with its own, and a bad setting is one clear error before any store is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphroute.core.config.settings import STORE_PARAMS_ENV, Settings
from graphroute.core.engine import GraphRoute, open_store
from graphroute.core.errors import ConfigError
from graphroute.plugins.stores.embedded import EmbeddedStore

from tests.engine.test_cli_errors import run_cli


def test_a_backend_opens_with_its_own_parameters(tmp_path: Path) -> None:
    both = {"embedded": {"busy_timeout_s": 5.0, "synchronous": "FULL"}, "neo4j": {"exact_max": 7}}
    store = open_store(str(tmp_path / "s"), settings=Settings(store_params=both))
    assert isinstance(store, EmbeddedStore)
    assert store._timeout == 5.0
    default = open_store(str(tmp_path / "d"), settings=Settings(store_params={}))
    assert isinstance(default, EmbeddedStore) and default._timeout == 60.0
    # the Python API takes them through its settings
    gr = GraphRoute(store=str(tmp_path / "g"), settings=Settings(store_params={"embedded": {"busy_timeout_s": 2.5}}))
    assert isinstance(gr.store, EmbeddedStore) and gr.store._timeout == 2.5
    for opened in (store, default, gr):
        opened.close()


def test_a_bad_parameter_is_named_and_no_store_is_made(tmp_path: Path) -> None:
    where = tmp_path / "never"
    with pytest.raises(ConfigError) as err:
        open_store(str(where), settings=Settings(store_params={"embedded": {"busy_timeout": 5}}))
    msg = str(err.value)
    assert f"store_params ({STORE_PARAMS_ENV})" in msg and "'embedded'" in msg and "busy_timeout" in msg  # Python or env
    assert "known parameters: busy_timeout_s, synchronous" in msg
    with pytest.raises(ConfigError, match="busy_timeout_s"):
        open_store(str(where), settings=Settings(store_params={"embedded": {"busy_timeout_s": -1}}))
    with pytest.raises(ConfigError, match=r"no installed store backend: neo5j \(installed: .*embedded"):
        open_store(str(where), settings=Settings(store_params={"neo5j": {"exact_max": 1}}))
    assert not where.exists()


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("{not json", "is not valid JSON"),
        ('{"embedded": 5}', "must be a JSON object of objects keyed by store backend"),
        ('{"embedded": {"busy": 1}}', "known parameters: busy_timeout_s, synchronous"),
    ],
)
def test_the_cli_reports_a_bad_setting_with_exit_2(tmp_path: Path, value: str, needle: str) -> None:
    r = run_cli("stats", "--store", str(tmp_path / "s"), "--group", "g", env={STORE_PARAMS_ENV: value})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "s").exists()
