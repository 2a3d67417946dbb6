"""Concat of many operands is near-linear (issue 34): type inference builds the symbolic sum of
K extents with O(K) simplification steps, and fusion looks only at the kernels that write what
a consumer reads (the old scan looked at every earlier step for each consumer and restarted
from the first step after every merge). Operation counts stand in for time (no timed tests);
the fused programs are the ones the old fusion scan made, on random programs."""

from __future__ import annotations

import random
from collections.abc import Sequence

from compiler_helpers import module_of, var

from tilefoundry.compiler import fusion
from tilefoundry.compiler.kir import HostLoop, Kernel, to_text
from tilefoundry.compiler.pipeline import compile
from tilefoundry.semantics import types as T
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Concat, ReLU, Transpose
from tilefoundry.semantics.ops import Reduce as HReduce
from tilefoundry.semantics.typeinfer.functions import infer_module
from tilefoundry.semantics.types import DimAdd, DimVar, TensorType, dim_sum, simplify


def _concat(k: int, symbolic: bool) -> Module:
    ps = tuple(Var(f"x{i}", TensorType((DimVar(f"N{i}", 1, 8) if symbolic else 2,), DType.F32))
               for i in range(k))
    return Module((Function("f", ps, Call(Concat(0), ps), None),))


def _count_simplify(monkeypatch, k: int) -> tuple[int, object]:
    calls = [0]
    real = T.simplify

    def counting(d):
        calls[0] += 1
        return real(d)

    monkeypatch.setattr(T, "simplify", counting)  # the recursion goes through the module name
    m = _concat(k, True)
    ext = infer_module(m).functions[0].body.checked_type.shape[0]
    monkeypatch.setattr(T, "simplify", real)
    return calls[0], ext


def test_symbolic_concat_type_inference_is_linear_in_operands(monkeypatch):
    small, _ = _count_simplify(monkeypatch, 200)
    big, ext = _count_simplify(monkeypatch, 800)
    # 4x the operands: 4x the simplification steps (quadratic was 16x)
    assert big <= 4 * small + 100, (small, big)
    # the extent is the left-deep sum N0 + N1 + ... + N799, as before
    d, names = ext, []
    while isinstance(d, DimAdd):
        names.append(d.rhs.name)
        d = d.lhs
    names.append(d.name)
    assert names[::-1] == [f"N{i}" for i in range(800)]


def test_dim_sum_is_simplify_of_the_left_deep_sum():
    n, m = DimVar("N", 1, 9), DimVar("M", 1, 9)
    rng = random.Random(5)
    pool = [0, 1, 3, n, m, n * 2, m - 1, n // 2, T.dim_min(n, 4)]
    for _ in range(300):
        terms = [rng.choice(pool) for _ in range(rng.randint(1, 6))]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        assert dim_sum(terms) == simplify(total), terms


class _CountingFuser(fusion._Fuser):
    io_calls = 0

    def io(self, step):
        _CountingFuser.io_calls += 1
        return super().io(step)


def _io_calls(monkeypatch, k: int) -> int:
    monkeypatch.setattr(fusion, "_Fuser", _CountingFuser)
    _CountingFuser.io_calls = 0
    c = compile(_concat(k, False), "f", [(2,)] * k)
    assert len(c.kernels) == k  # one copy per operand (nothing to merge)
    return _CountingFuser.io_calls


def test_concat_fusion_is_linear_in_operands(monkeypatch):
    small, big = _io_calls(monkeypatch, 100), _io_calls(monkeypatch, 400)
    assert big <= 4 * small + 50, (small, big)  # the old scan: ~16x


# --- the fused programs are the old scan's ------------------------------------------------------
def _old_fuse_list(fz: fusion._Fuser, steps: Sequence) -> tuple:
    """The fusion scan before issue 34 (restart after every merge), as the oracle."""
    from dataclasses import replace

    out = []
    for s in steps:
        if isinstance(s, HostLoop):
            s = replace(s, body=_old_fuse_list(fz, s.body))
        out.append(s)
    work = list(out)
    changed = True
    while changed:
        changed = False
        for j, C in enumerate(work):
            if not isinstance(C, Kernel):
                continue
            reads = fz.io(C)[0]
            for i in range(j - 1, -1, -1):
                P = work[i]
                if not isinstance(P, Kernel) or not (fz.io(P)[1] & reads):
                    continue
                merged = fz.try_merge(work, i, j)
                if merged is None:
                    continue
                work[j] = merged
                del work[i]
                changed = True
                break
            if changed:
                break
    return tuple(work)


def _random_program(rng: random.Random) -> tuple[Module, list[tuple[int, ...]]]:
    shape = (4, 8)
    ps = [var(f"x{i}", shape, DType.F32) for i in range(rng.randint(1, 3))]
    vals: list = list(ps)
    outs = []
    for _ in range(rng.randint(2, 12)):
        r = rng.random()
        a, b = rng.choice(vals), rng.choice(vals)
        if r < 0.45:
            v = Call(Binary(rng.choice([BinaryKind.ADD, BinaryKind.MUL, BinaryKind.MAX])), (a, b))
        elif r < 0.6:
            v = Call(ReLU(), (a,))
        elif r < 0.75:
            v = Call(HReduce(axes=(1,), keepdim=True), (a,))
            v = Call(Binary(BinaryKind.SUB), (a, v))
        elif r < 0.85:
            v = Call(Transpose((1, 0)), (a,))
            v = Call(Transpose((1, 0)), (v,))
        else:
            v = Call(Concat(1), (a, b))
            v = Call(HReduce(axes=(1,), keepdim=True), (v,))
            v = Call(Binary(BinaryKind.ADD), (a, v))
        vals.append(v)
        if rng.random() < 0.3:
            outs.append(v)
    outs.append(vals[-1])
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    return module_of(ps, body), [shape] * len(ps)


def test_fusion_makes_the_old_scans_programs(monkeypatch):
    rng = random.Random(34)
    merged = 0
    for _ in range(40):
        m, shapes = _random_program(rng)
        new = compile(m, "f", shapes)
        with monkeypatch.context() as mp:
            mp.setattr(fusion, "_fuse_list", _old_fuse_list)
            old = compile(m, "f", shapes)
        assert to_text(new.program) == to_text(old.program)
        unfused = compile(m, "f", shapes, fuse=False)
        merged += len(unfused.kernels) - len(new.kernels)
    assert merged > 40  # the programs do fuse (the comparison is not of unfused programs)


def test_a_deep_concat_extent_prints_hashes_and_compares():
    """The left-deep sum of 3,000 extents is 3,000 levels deep: str, hash and == walk it in a
    loop (they recursed past Python's stack)."""
    t1 = infer_module(_concat(3000, True)).functions[0].body.checked_type
    t2 = infer_module(_concat(3000, True)).functions[0].body.checked_type
    assert t1 is not t2 and t1 == t2 and hash(t1) == hash(t2)
    text = str(t1.shape[0])
    assert text.startswith("(" * 2999 + "N0 + N1) + N2)") and text.endswith(" + N2999)")
    t3 = infer_module(_concat(2999, True)).functions[0].body.checked_type
    assert t1 != t3


def test_dim_expression_equality_and_hash_are_structural():
    n, m = DimVar("N", 1, 9), DimVar("M", 1, 9)
    assert (n + 1) == (n + 1) and hash(n + 1) == hash(n + 1)
    assert (n + 1) != (1 + n) and (n + 1) != (n - 1) and (n + 1) != (n + 2)
    assert T.dim_min(n, m) != T.dim_max(n, m) and (n + 1) != 3
    assert str(T.dim_min(n + 1, m * 2) // 3) == "(dim_min((N + 1), (M * 2)) // 3)"
    assert len({n + m, n + m, m + n}) == 2
