"""The Triton autotuner's record (``compiler/triton_tune.py``, D277): what is chosen, where it
is written, and that the ``triton-cuda`` target lowers with it. The measurement itself needs a
GPU (``benchmarks/bench_gpu.py --tune``); everything after it is checked here."""

from __future__ import annotations

import json

import pytest

from tilefoundry.compiler import triton_tune
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.compiler.triton_backend import TRITON_TILES
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dsl import parse_module

SRC = """
R = DimVar("R", 1, 1 << 16)
C = DimVar("C", 1, 1 << 16)

@func
def sw(g: Tensor[(R, C), bf16], u: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return silu(g) * u

@func
def sw2(g: Tensor[(R, C), bf16], u: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return silu(u) * g
"""


@pytest.fixture()
def mod():
    import tilefoundry.semantics.dsl as dsl

    env = {k: getattr(dsl, k) for k in dir(dsl) if not k.startswith("_")}
    env.update(dsl.DTYPE_NAMES)
    return parse_module(SRC, env)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))


def _row(ms, verdict, tile=2048, warps=8):
    return {"tile_elems": tile, "max_row": 16384, "k_block": 64, "dot_mn": [128, 128],
            "num_warps": warps, "num_stages": 1, "ms": ms, "verdict": verdict, "error": None}


def test_the_key_changes_with_the_program_the_entry_and_the_shapes(mod) -> None:
    k = triton_tune.program_key(mod, "sw", [(64, 64), (64, 64)])
    assert k == triton_tune.program_key(mod, "sw", [(64, 64), (64, 64)])
    assert k != triton_tune.program_key(mod, "sw2", [(64, 64), (64, 64)])
    assert k != triton_tune.program_key(mod, "sw", [(64, 128), (64, 128)])


def test_a_fast_candidate_the_oracle_did_not_pass_is_never_recorded(mod) -> None:
    results = [_row(0.5, "FAIL: 3 mismatches", tile=1024), _row(0.7, "PASS", tile=4096),
               _row(0.9, "PASS", tile=2048), _row(None, None)]
    key = triton_tune.program_key(mod, "sw", [(64, 64)] * 2)
    entry = triton_tune.record(key, "sw", [(64, 64)] * 2, results, "test-device")
    assert entry["best"]["tile_elems"] == 4096 and entry["best"]["ms"] == 0.7
    data = json.loads(triton_tune.user_table().read_text())
    assert data["programs"][key]["measured"] == results


def test_nothing_passed_is_an_error_naming_the_entry(mod) -> None:
    key = triton_tune.program_key(mod, "sw", [(64, 64)] * 2)
    with pytest.raises(InvalidArgumentError, match="autotune sw: no candidate PASSed"):
        triton_tune.record(key, "sw", [(64, 64)] * 2, [_row(0.1, "FAIL: x")], "d")


def test_the_triton_cuda_target_lowers_with_the_record(mod) -> None:
    shapes = [(64, 4096), (64, 4096)]
    before = tf_compile(mod, "sw", shapes, "triton-cuda")
    assert "'num_warps': 16" not in before.executable.source
    key = triton_tune.program_key(mod, "sw", shapes)
    triton_tune.record(key, "sw", shapes, [_row(0.3, "PASS", tile=4096, warps=16)], "d")
    after = tf_compile(mod, "sw", shapes, "triton-cuda")
    assert "'num_warps': 16" in after.executable.source
    assert [k.block for k in after.program.kernels()] == [(1, 4096)]
    assert [k.block for k in before.program.kernels()] == [(1, 2048)]
    # another program, or the same at other shapes, keeps the defaults
    other = tf_compile(mod, "sw2", shapes, "triton-cuda")
    assert "'num_warps': 16" not in other.executable.source
    assert "'num_warps': 16" not in tf_compile(mod, "sw", [(64, 2048)] * 2,
                                               "triton-cuda").executable.source
    # an explicit cfg wins over the record
    assert "'num_warps': 16" not in tf_compile(mod, "sw", shapes, "triton-cuda",
                                               cfg=TRITON_TILES).executable.source


def test_a_recorded_hoist_reaches_the_renderer_and_not_the_launch(mod) -> None:
    """A record whose best hoists the loads (``hoist_loads``, a render option) renders the
    kernel's loads first; Triton's launch options never receive it."""
    shapes = [(64, 4096), (64, 4096)]
    key = triton_tune.program_key(mod, "sw", shapes)
    triton_tune.record(key, "sw", shapes, [{**_row(0.3, "PASS", tile=4096, warps=16),
                                             "hoist_loads": 1}], "d")
    cfg = triton_tune.tuned_config(mod, "sw", shapes, TRITON_TILES)
    assert ("hoist_loads", 1) in cfg.launch
    src = tf_compile(mod, "sw", shapes, "triton-cuda").executable.source
    assert "hoist_loads" not in src.split("KERNELS = {", 1)[1]
    assert "'num_warps': 16" in src


def test_a_damaged_table_is_ignored(mod) -> None:
    path = triton_tune.user_table()
    path.write_text("{not json")
    assert triton_tune.tuned_config(mod, "sw", [(8, 8)] * 2, TRITON_TILES) == TRITON_TILES
    key = triton_tune.program_key(mod, "sw", [(8, 8)] * 2)
    path.write_text(json.dumps({"version": 1, "programs": {key: {"best": {"tile_elems": "x"}}}}))
    assert triton_tune.tuned_config(mod, "sw", [(8, 8)] * 2, TRITON_TILES) == TRITON_TILES


def test_the_candidate_spaces() -> None:
    rows = triton_tune.candidates("rows", TRITON_TILES)
    assert {c.cfg.tile_elems for c in rows} == {2048, 4096, 8192, 16384}
    assert {c.num_warps for c in rows} == {4, 8, 16}
    hoist = [c for c in rows if dict(c.extra).get("hoist_loads") == 1]
    assert {c.num_warps for c in hoist} == {4, 8, 16}
    assert all(("hoist_loads", 1) in c.config().launch for c in hoist)
    dots = triton_tune.candidates("dot", TRITON_TILES)
    assert {c.cfg.dot_mn for c in dots} == {(128, 128), (128, 256), (256, 128)}
    assert all(c.config().launch == (("num_warps", c.num_warps), ("num_stages", c.num_stages))
               for c in dots)
    with pytest.raises(InvalidArgumentError, match="unknown candidate kind 'conv'"):
        triton_tune.candidates("conv", TileConfig())
