"""A test plugin (``GRAPHROUTE_PLUGINS=tests.reliability.pause_plugin``) that holds a CLI run
at a known point, so a test can interrupt it there: an index step, a query stage and a
loader (``.pause`` files, read as plain text: the run is held before it writes anything)
that write the file ``GRAPHROUTE_TEST_PAUSE`` names, then wait for ``seconds``. Without that
variable they do nothing, so a later run of the same profile or route goes straight through."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphroute.core import (
    IndexContext,
    IndexStep,
    Loader,
    QueryState,
    Slot,
    SourceDocument,
    Stage,
    StageContext,
    StageKind,
    StageParams,
    hookimpl,
)
from graphroute.core.api.components import ComponentParams
from graphroute.plugins.loaders.files import FileLoaderParams, TextLoader
from pydantic import Field

PAUSE_ENV = "GRAPHROUTE_TEST_PAUSE"


def _pause(seconds: float) -> None:
    marker = os.environ.get(PAUSE_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()), encoding="utf-8")
        time.sleep(seconds)


class PauseStep(IndexStep):
    """An index step that pauses the run between two other steps."""

    name = "t_pause_step"

    class Params(ComponentParams):
        seconds: float = Field(60.0, ge=0.0)

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        _pause(self.params.seconds)
        return {}


class PauseStage(Stage):
    """A query stage that pauses the query."""

    name = "t_pause"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        seconds: float = Field(60.0, ge=0.0)

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        _pause(self.params.seconds)


class PauseLoader(TextLoader):
    """Plain text in ``.pause`` files, read after a pause."""

    name = "t_pause_text"
    extensions = (".pause",)

    class Params(FileLoaderParams):
        seconds: float = Field(3.0, ge=0.0)

    params: Params

    def load(self, path: Path) -> Iterator[SourceDocument]:
        _pause(self.params.seconds)
        yield from super().load(path)


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [PauseLoader]


@hookimpl
def register_index_steps() -> list[type[IndexStep]]:
    return [PauseStep]


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [PauseStage]
