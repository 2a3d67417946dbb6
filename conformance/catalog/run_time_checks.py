"""The expected-error cases (``spec/run-time-check/<check>/...``) (split from
``conformance/catalog.py``, D383).

Inputs that fail a run-time check of the spec; a backend passes by raising ``RunTimeCheckError``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.conformance.catalog.build import (
    ENTRY,
    F32,
    I32,
    I64,
    Acc,
    Built,
    make_call,
    make_mesh,
    make_module,
    make_var,
    scalar_array,
    shard_layout,
    tensor_type,
    values_array,
)
from tilefoundry.semantics.ir import (
    Call,
    DimVarRangePat,
    Function,
    Module,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    CacheUpdate,
    Gather,
    InsertSlice,
    Reshard,
    RoPE,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Split,
)

# =============================================================================================
# expected-error cases: the run-time checks of the spec
# =============================================================================================
_S_RTC_GATHER = ("HIR Gather: \"Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], "
                 "t..]\" — an index outside [0, x.shape[axis]) names no element of x (negative "
                 "indices do not wrap); the indices are run-time values, so the check is made "
                 "at eval / run time.")


_S_RTC_ROPE = ("HIR RoPE: \"Rotate query and key tensors using position-indexed cos/sin "
               "caches.\" — a pos_ids entry outside [0, P) indexes no cache row.")


_S_RTC_CACHE = ("HIR CacheUpdate: \"cur_pos >= 0, 1 <= s <= new.len, and cur_pos + s <= "
                "cache.len MUST be checked at eval/runtime, not typeinfer, because their "
                "operands are runtime values.\"")


_S_RTC_INSERT = ("HIR InsertSlice: \"A literal (compile-time) offset that places a negative or "
                 "out-of-bounds window on an axis fails typeinfer, naming the axis; a runtime "
                 "offset is checked at eval/runtime.\"")


_S_RTC_DISPATCH = ("HIR Function, Dispatch resolution: \"A shape outside the envelope matches "
                   "no variant and is an error; there is no base body to fall back to (the "
                   "prototype body is None).\"")


def _run_time_check_cases(acc: Acc) -> None:
    """Inputs that fail each run-time check of the spec, every case tiny and in the quick tier
    (``Case.expect_error`` names the check; the runner verifies the reference raises it)."""
    add = acc.add

    def gather(idx: list, batched: bool = False) -> Callable[[], Built]:
        def build() -> Built:
            a = np.arange(10, dtype=np.float32).reshape(2, 5)
            i = np.asarray(idx, np.int64 if batched else np.int32)
            x, iv = make_var("x", a.shape, F32), make_var("i", i.shape, I64 if batched else I32)
            op = Gather(axis=1, batch_dims=1) if batched else Gather(axis=1)
            return make_module([x, iv], make_call(op, x, iv)), ENTRY, [a, i]

        return build

    for w, idx, batched in (("index-negative", [[0, -1, 2]], False),
                            ("index-at-extent", [[4, 5, 0]], False),
                            ("index-far-beyond-extent", [[1 << 30]], False),
                            ("batched-index-at-extent", [[4, 0], [5, 1]], True)):
        add(f"spec/run-time-check/index_range/gather-{w}/f32", "run-time-check",
            gather(idx, batched), ops=("Gather",), dtypes=(F32, I64 if batched else I32),
            spec=_S_RTC_GATHER, tier="quick", expect_error="index_range")

    def gather_split() -> Built:
        mesh, topo = make_mesh((2,))
        a = np.arange(12, dtype=np.float32).reshape(4, 3)
        x = make_var("x", (4, 3), F32, shard_layout(mesh, (Split(0),), (4, 3)))
        idx = np.asarray([3, 4], np.int64)
        i = make_var("i", idx.shape, I64)
        g = make_call(Gather(axis=0), x, i)
        out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (2, 3))), g)
        return make_module([x, i], out, topo), ENTRY, [a, idx]

    add("sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32",
        "run-time-check", gather_split, ops=("Gather", "Reshard"), dtypes=(F32, I64),
        spec=_S_RTC_GATHER, tier="quick", expect_error="index_range")

    def rope(pos: list) -> Callable[[], Built]:
        def build() -> Built:
            s, d, p = 3, 4, 5
            q = np.linspace(-1, 1, 2 * s * d, dtype=np.float32).reshape(2, s, d)
            k = q[::-1].copy()
            ang = np.outer(np.arange(p), [1.0, 0.01])
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = values_array(np.cos(ang), F32), values_array(np.sin(ang), F32)
            pos_a = np.asarray(pos, np.int64)
            qv, kv = make_var("q", q.shape, F32), make_var("k", k.shape, F32)
            cv, sv = make_var("cos", cos.shape, F32), make_var("sin", sin.shape, F32)
            pv = make_var("pos", pos_a.shape, I64)
            body = make_call(RoPE(), qv, kv, cv, sv, pv)
            return make_module([qv, kv, cv, sv, pv], body), ENTRY, [q, k, cos, sin, pos_a]

        return build

    for w, pos in (("position-negative", [0, -1, 2]), ("position-at-cache-len", [4, 5, 0])):
        add(f"spec/run-time-check/index_range/rope-{w}/f32", "run-time-check", rope(pos),
            ops=("RoPE",), dtypes=(F32, I64), spec=_S_RTC_ROPE, tier="quick",
            expect_error="index_range")

    def cache_update(cur: int, s: int) -> Callable[[], Built]:
        def build() -> Built:
            c = np.zeros((1, 4, 1, 2), np.float32)
            n = np.arange(1, 7, dtype=np.float32).reshape(1, 3, 1, 2)
            cv, nv = make_var("cache", c.shape, F32), make_var("new", n.shape, F32)
            pv, sv = make_var("cur_pos", (), I32), make_var("s", (), I32)
            body = make_call(CacheUpdate(), cv, pv, sv, nv)
            return make_module([cv, pv, sv, nv], body), ENTRY, [c, scalar_array(cur), scalar_array(s), n]

        return build

    # cache.len = 4, new.len = 3
    for w, cur, s in (("cur-pos-negative", -1, 2), ("s-zero", 0, 0), ("s-negative", 0, -1),
                      ("s-exceeds-new-len", 0, 4), ("window-past-cache-end", 2, 3)):
        add(f"spec/run-time-check/cache_bounds/{w}/f32", "run-time-check", cache_update(cur, s),
            ops=("CacheUpdate",), dtypes=(F32, I32), spec=_S_RTC_CACHE, tier="quick",
            expect_error="cache_bounds")

    def insert(o0: int, o1: int) -> Callable[[], Built]:
        def build() -> Built:
            d = np.zeros((3, 4), np.float32)
            u = np.ones((2, 2), np.float32)
            dv, uv = make_var("dst", d.shape, F32), make_var("update", u.shape, F32)
            v0, v1 = make_var("o0", (), I32), make_var("o1", (), I32)
            return (make_module([dv, uv, v0, v1], make_call(InsertSlice(), dv, uv, v0, v1)), ENTRY,
                    [d, u, scalar_array(o0), scalar_array(o1)])

        return build

    # dst (3, 4), update (2, 2): valid offsets are [0, 1] on axis 0 and [0, 2] on axis 1
    for w, o0, o1 in (("offset-negative", 0, -1), ("window-past-end", 2, 0),
                      ("window-past-end-last-axis", 1, 3)):
        add(f"spec/run-time-check/slice_window/{w}/f32", "run-time-check", insert(o0, o1),
            ops=("InsertSlice",), dtypes=(F32, I32), spec=_S_RTC_INSERT, tier="quick",
            expect_error="slice_window")

    def prototype(name: str, m: DimVar) -> Function:
        proto = Function(name, (make_var("x", (m,), F32),), None, tensor_type((m,), F32))
        for lo, hi, kind, label in ((2, 5, BinaryKind.ADD, "small"),
                                    (5, 9, BinaryKind.MUL, "large")):
            xv = make_var("x", (m,), F32)
            proto.add_variant(Function(name, (xv,), make_call(Binary(kind), xv, xv), tensor_type((m,), F32),
                                       (DimVarRangePat("M", lo, hi),), label=label))
        return proto

    def dispatch_entry(n: int) -> Callable[[], Built]:
        def build() -> Built:  # the entry is the dispatch prototype itself
            entry = prototype(ENTRY, DimVar("M", 2, 9))
            return Module((entry,)), ENTRY, [np.arange(n, dtype=np.float32)]

        return build

    def dispatch_call(n: int) -> Callable[[], Built]:
        def build() -> Built:  # the entry calls the prototype with an argument of its envelope
            m = DimVar("M", 2, 9)
            proto = prototype("g", m)
            y = make_var("y", (m,), F32)
            body = make_call(Unary(UnaryKind.NEG), Call(proto, (y,)))
            return make_module([y], body, extra=(proto,)), ENTRY, [np.arange(n, dtype=np.float32)]

        return build

    # the envelope is M in [2, 9), partitioned [2, 5) and [5, 9)
    for w, make, n, ops in (
            ("entry-below-envelope", dispatch_entry, 1, ("Binary",)),
            ("entry-at-envelope-end", dispatch_entry, 9, ("Binary",)),
            ("call-at-envelope-end", dispatch_call, 9, ("Binary", "Unary", "Unary.neg"))):
        add(f"spec/run-time-check/dispatch_envelope/{w}/f32", "run-time-check", make(n),
            ops=ops, dtypes=(F32,), spec=_S_RTC_DISPATCH, tier="quick",
            expect_error="dispatch_envelope")
