"""Small synthetic catalogs for the runner's tests (the real catalog is the conformance/catalog/ package).

``build_catalog(seed)``: tier ``quick`` holds passing elementwise / cast / reduce programs plus
three cases the flaky backend breaks (``flaky/segv``, ``flaky/hang``, ``flaky/garbage``); tier
``full`` adds ``flaky/raise``, ``flaky/malformed``, ``flaky/exit``, ``flaky/ulp1``, an i8 case
(NOT_SUPPORTED on the flaky backend) and the planted buried-mul program. Inputs depend on the
seed. ``generate(seed)`` is a program generator for ``fuzz --generator``."""

from __future__ import annotations

import zlib

import numpy as np

from tilefoundry.conformance.cases import Case, Catalog
from tilefoundry.oracle.planted import buried_program
from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.ops.tensor import Cast, Reduce, ReduceKind
from tilefoundry.semantics.types import TensorType


def _data(dt: DType, n: int, seed: int, salt: str) -> np.ndarray:
    g = np.random.default_rng(seed * 1000003 + zlib.crc32(salt.encode()))
    if dt.is_float:
        return cast(g.uniform(-4, 4, n).astype(np.float32), dt)
    return g.integers(-8, 8, n).astype(FORMATS[dt].storage)


def binary(case_id: str, kind: BinaryKind, dt: DType, seed: int, entry: str = "f", n: int = 8):
    def build():
        t = TensorType((n,), dt)
        x, y = Var("x", t), Var("y", t)
        m = Module((Function(entry, (x, y), Call(Binary(kind), (x, y)), None),))
        return m, entry, [_data(dt, n, seed, case_id + "x"), _data(dt, n, seed, case_id + "y")]
    return build


def cast_case(src: DType, dst: DType, seed: int, n: int = 8):
    def build():
        x = Var("x", TensorType((n,), src))
        m = Module((Function("f", (x,), Call(Cast(dst), (x,)), None),))
        return m, "f", [_data(src, n, seed, f"cast{src}{dst}")]
    return build


def reduce_case(seed: int, n: int = 16):
    def build():
        x = Var("x", TensorType((n,), DType.F32))
        op = Reduce(axes=(0,), keepdim=False, kind=ReduceKind.SUM, policy="unordered_tree")
        m = Module((Function("f", (x,), Call(op, (x,)), None),))
        return m, "f", [_data(DType.F32, n, seed, "reduce")]
    return build


def cases(seed: int = 0) -> list[Case]:
    B = BinaryKind
    out = [
        Case("elementwise/add/f32", "elementwise", binary("add", B.ADD, DType.F32, seed),
             ("Binary.add",), ("f32",)),
        Case("elementwise/mul/bf16", "elementwise", binary("mul", B.MUL, DType.BF16, seed),
             ("Binary.mul",), ("bf16",)),
        Case("elementwise/max/f16", "elementwise", binary("max", B.MAX, DType.F16, seed)),
        Case("cast/f32-bf16", "cast", cast_case(DType.F32, DType.BF16, seed), ("Cast",),
             ("f32", "bf16")),
        Case("reduce/sum/f32", "reduce", reduce_case(seed)),
        Case("flaky/segv", "flaky", binary("segv", B.ADD, DType.F32, seed, "segv")),
        Case("flaky/hang", "flaky", binary("hang", B.ADD, DType.F32, seed, "hang")),
        Case("flaky/garbage", "flaky", binary("garbage", B.SUB, DType.F32, seed, "garbage")),
        Case("elementwise/sub/f32", "elementwise", binary("sub", B.SUB, DType.F32, seed)),
    ]
    full = [
        Case("flaky/raise", "flaky", binary("raise", B.ADD, DType.F32, seed, "raise"),
             tier="full"),
        Case("flaky/malformed", "flaky", binary("malf", B.ADD, DType.F32, seed, "malformed"),
             tier="full"),
        Case("flaky/exit", "flaky", binary("exit", B.ADD, DType.F32, seed, "exit"),
             tier="full"),
        Case("flaky/ulp1", "flaky", binary("ulp1", B.MUL, DType.BF16, seed, "ulp1"),
             tier="full"),
        Case("int/add/i8", "int", binary("i8", B.ADD, DType.I8, seed), tier="full"),
        Case("planted/buried", "planted", lambda: buried_program(12, seed, n=8), tier="full"),
    ]
    return out + full


def build_catalog(seed: int = 0, *, backend_caps=None) -> Catalog:
    return Catalog(cases(seed))


def build_no_hang(seed: int = 0, *, backend_caps=None) -> Catalog:
    return Catalog(c for c in cases(seed) if c.id != "flaky/hang")


def generate(seed: int):
    """A small random bf16 elementwise program (the planted generator's shape)."""
    return buried_program(3 + seed % 5, seed, n=8)


def build_flip(seed: int = 0, *, backend_caps=None) -> Catalog:
    """Three cases for --flake-retries: ``flaky/flip`` (fails the flaky backend's first
    ``$FLIP_FAILS`` runs, passes after), ``flaky/garbage`` (fails every run) and a passing add."""
    B = BinaryKind
    return Catalog([
        Case("flaky/flip", "flaky", binary("flip", B.ADD, DType.F32, seed, "flip")),
        Case("flaky/garbage", "flaky", binary("garbage", B.SUB, DType.F32, seed, "garbage")),
        Case("elementwise/add/f32", "elementwise", binary("add", B.ADD, DType.F32, seed)),
    ])


def build_warn(seed: int = 0, *, backend_caps=None) -> Catalog:
    """``flaky/warn`` (the flaky backend warns, then passes), ``flaky/garbage`` (fails) and a
    passing add: for warnings attributed to their case and for the HTML report."""
    B = BinaryKind
    return Catalog([
        Case("flaky/warn", "flaky", binary("warn", B.ADD, DType.F32, seed, "warn")),
        Case("flaky/garbage", "flaky", binary("garbage", B.SUB, DType.F32, seed, "garbage")),
        Case("elementwise/add/f32", "elementwise", binary("add", B.ADD, DType.F32, seed)),
    ])


def build_adds(seed: int = 0, *, backend_caps=None) -> Catalog:
    """32 passing f32 adds (``add/<k>``): for a backend that misbehaves on every run."""
    return Catalog(Case(f"add/{k}", "elementwise",
                        binary(f"add{k}", BinaryKind.ADD, DType.F32, seed + k))
                   for k in range(32))


def slow_case(case_id: str, pid_file: str, delay: float, seed: int = 0) -> Case:
    """A passing f32 add whose build appends ``"<id> <pid>"`` to ``pid_file`` and then sleeps
    ``delay`` seconds: a case whose worker a test can kill mid-case."""
    inner = binary(case_id.replace("/", "_"), BinaryKind.ADD, DType.F32, seed)

    def build():
        import os
        import time

        with open(pid_file, "a") as f:
            f.write(f"{case_id} {os.getpid()}\n")
        time.sleep(delay)
        return inner()

    return Case(case_id, "slow", build, ("Binary.add",), ("f32",))
