"""Loading the torch extra's embedder on a machine without a GPU leaves Triton's shared library
unmapped (transformers' import chain would load it only to learn that it is installed), and
the vectors are the same to the bit as with Triton loaded."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch

PROBE = """
import json, sys
import numpy as np
import torch
from graphroute.plugins.embedders.st_torch import SentenceTransformersEmbedder
vectors = SentenceTransformersEmbedder().embed(["Who founded the harbour archive?", "The archive was founded in 1820."])
with open("/proc/self/maps", encoding="ascii") as fh:
    mapped = any("libtriton" in line for line in fh)
print(json.dumps({"cuda": torch.cuda.is_available(), "libtriton_mapped": mapped,
                  "triton_module": repr(sys.modules.get("triton", "absent")),
                  "vectors": vectors.astype(np.float64).tolist()}))
"""


def probe(**env: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_without_a_gpu_the_embedder_loads_no_triton_and_embeds_the_same() -> None:
    try:
        importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("Triton is not installed, so there is nothing to leave unloaded")
    left_out = probe()
    if left_out["cuda"]:
        pytest.skip("a CUDA device is visible: Triton stays importable there")
    assert left_out["triton_module"] == "None"
    assert left_out["libtriton_mapped"] is False

    loaded = probe(GRAPHROUTE_LOAD_TRITON="1")
    assert loaded["libtriton_mapped"] is True  # the switch keeps transformers' own import path
    assert loaded["vectors"] == left_out["vectors"]
