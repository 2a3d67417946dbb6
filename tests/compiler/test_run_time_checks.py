"""The compiled backends make the spec's run-time checks (``tilefoundry.errors.RUN_TIME_CHECKS``)
and report them by the conformance protocol: ``RunTimeCheckError`` naming the check.

Where each check runs (``compiler/lower.py``, ``RunCheck`` / ``RunChecks``): on the host,
vectorized, before the first kernel when the checked operand is an input or a constant; when a
kernel computes it (or the op sits in a host loop, which may run it any number of times) a check
kernel emitted before the op's own kernel records the failing lanes' values in probe buffers the
host reads after the launch. ``dispatch_envelope`` is checked on the input shapes before
compiling (``compiler/backends.py``, ``check_envelopes``).
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.simd_backend import SimdBackend
from tilefoundry.conformance.backend import ReferenceBackend
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.conformance.catalog.build import (
    ENTRY,
    make_call,
    make_module,
    make_var,
    scalar_array,
)
from tilefoundry.conformance.runner import run
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Constant, GridRegionExpr, Var
from tilefoundry.semantics.ops import CacheUpdate, Gather, InsertSlice, Reshape, RoPE, Zeros
from tilefoundry.semantics.ops.math import Binary, BinaryKind

F32, I32, I64 = DType.F32, DType.I32, DType.I64
BACKENDS = ("kernel-interp", "simd")
SHARDED = "sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32"


@pytest.fixture(scope="module")
def catalog():
    return build_catalog(0)


@pytest.fixture(scope="module")
def errors(catalog):
    return [c for c in catalog if c.expect_error]


@pytest.fixture(scope="module")
def in_range(catalog):
    """The in-range cases of the same ops (and the loop folds that gather by the loop index)."""
    return [c for c in catalog.tier("quick")
            if c.id.startswith(("spec/gather/", "spec/cache-update/", "spec/insert-slice/",
                                "spec/rope/", "spec/function/dispatch-", "spec/grid/"))
            and not c.expect_error]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_expected_error_case_passes(tmp_path, errors, in_range, backend):
    assert len(errors) == 22  # 18 HIR ones + two tile-family sort_nan and two topk_nan cases
    res = run(backend, errors + in_range, jobs=2, timeout_s=120, seed=0,
              out_jsonl=tmp_path / "r.jsonl")
    rec = {r["id"]: r for r in res.records}
    verdicts = {c.id: rec[c.id]["verdict"] for c in errors}
    # the sharded case runs through the per-device lowering: its gather_index step checks the
    # indices against the global extent (lower_mesh, D260)
    assert SHARDED in verdicts
    assert verdicts == {i: "PASS" for i in verdicts}, \
        {i: rec[i]["message"][:300] for i, v in verdicts.items() if v != "PASS"}
    for c in errors:
        assert f"RunTimeCheckError({c.expect_error!r})" in rec[c.id]["message"], c.id
    assert len(in_range) >= 10
    assert {c.id: rec[c.id]["verdict"] for c in in_range} == {c.id: "PASS" for c in in_range}


@pytest.mark.parametrize("backend", [KernelInterpBackend(), SimdBackend()],
                         ids=lambda b: b.name)
def test_messages_name_the_op_value_position_and_range(catalog, backend):
    want = {
        "spec/run-time-check/index_range/gather-index-at-extent/f32":
            "Gather: index 5 at indices[0, 1] is outside [0, 5) on axis 1",
        "spec/run-time-check/index_range/gather-batched-index-at-extent/f32":
            "Gather: index 5 at indices[1, 0] is outside [0, 5) on axis 1",
        "spec/run-time-check/index_range/rope-position-negative/f32":
            "RoPE: pos_ids[1] = -1 is outside the cache positions [0, 5)",
        "spec/run-time-check/cache_bounds/window-past-cache-end/f32":
            "CacheUpdate: cur_pos + s = 2 + 3 = 5 exceeds cache.len = 4",
        "spec/run-time-check/slice_window/window-past-end-last-axis/f32":
            "InsertSlice: axis 1: offset 3 places the window [3, 5) of the update extent 2 "
            "outside the dst extent 4",
        "spec/run-time-check/dispatch_envelope/entry-at-envelope-end/f32":
            "@f parameter x: axis 0 has extent 9, outside the envelope of M [2, 9)",
    }
    for cid, msg in want.items():
        m, e, ins = catalog[cid].build()
        with pytest.raises(RunTimeCheckError) as info:
            backend.run(backend.compile(m, e), ins)
        assert msg in str(info.value), (cid, str(info.value))
        assert info.value.check == catalog[cid].expect_error


# ---------------------------------------------------------------------------------------------
# operands computed by kernels: the check kernel and its probe buffers
# ---------------------------------------------------------------------------------------------
def _computed_gather(idx: list) -> tuple:
    """out = Gather(axis=1)(x, i + z): the indices are a kernel's result, not an input."""
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    i = np.asarray(idx, np.int32)
    x, iv, zv = make_var("x", a.shape, F32), make_var("i", i.shape, I32), make_var("z", i.shape, I32)
    j = make_call(Binary(BinaryKind.ADD), iv, zv)
    return make_module([x, iv, zv], make_call(Gather(axis=1), x, j)), ENTRY, [a, i, np.zeros_like(i)]


def _computed_cache(cur: int, s: int) -> tuple:
    c = np.zeros((1, 4, 1, 2), np.float32)
    n = np.arange(1, 7, dtype=np.float32).reshape(1, 3, 1, 2)
    cv, nv = make_var("cache", c.shape, F32), make_var("new", n.shape, F32)
    pv, sv, zv = make_var("cur_pos", (), I32), make_var("s", (), I32), make_var("z", (), I32)
    add = Binary(BinaryKind.ADD)
    body = make_call(CacheUpdate(), cv, make_call(add, pv, zv), make_call(add, sv, zv), nv)
    return (make_module([cv, pv, sv, zv, nv], body), ENTRY,
            [c, scalar_array(cur), scalar_array(s), scalar_array(0), n])


def _computed_insert(o0: int, o1: int) -> tuple:
    d, u = np.zeros((3, 4), np.float32), np.ones((2, 2), np.float32)
    dv, uv = make_var("dst", d.shape, F32), make_var("update", u.shape, F32)
    v0, v1, zv = make_var("o0", (), I32), make_var("o1", (), I32), make_var("z", (), I32)
    add = Binary(BinaryKind.ADD)
    body = make_call(InsertSlice(), dv, uv, make_call(add, v0, zv), make_call(add, v1, zv))
    return (make_module([dv, uv, v0, v1, zv], body), ENTRY,
            [d, u, scalar_array(o0), scalar_array(o1), scalar_array(0)])


def _computed_rope(pos: list) -> tuple:
    s, d, p = 3, 4, 5
    q = np.linspace(-1, 1, 2 * s * d, dtype=np.float32).reshape(2, s, d)
    k = q[::-1].copy()
    ang = np.outer(np.arange(p), [1.0, 0.01])
    ang = np.concatenate([ang, ang], axis=-1)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pa = np.asarray(pos, np.int64)
    qv, kv = make_var("q", q.shape, F32), make_var("k", k.shape, F32)
    cv, sv = make_var("cos", cos.shape, F32), make_var("sin", sin.shape, F32)
    pv, zv = make_var("pos", pa.shape, I64), make_var("z", pa.shape, I64)
    body = make_call(RoPE(), qv, kv, cv, sv, make_call(Binary(BinaryKind.ADD), pv, zv))
    return (make_module([qv, kv, cv, sv, pv, zv], body), ENTRY,
            [q, k, cos, sin, pa, np.zeros_like(pa)])


def _loop_gather(n_iter: int) -> tuple:
    """acc = 0; for i in range(n_iter): acc = acc + x[i + off] — the index is the loop's."""
    x = make_var("x", (4,), F32)
    off = make_var("off", (), I32)
    i = make_var("i", (), I32)
    acc = Var("acc", None)
    g = make_call(Gather(axis=0), x, make_call(Binary(BinaryKind.ADD), i, off))
    step = make_call(Binary(BinaryKind.ADD), acc, g)
    loop = GridRegionExpr(i, (acc,), (make_call(Zeros((), F32)),), step, (step,), n_iter)
    return (make_module([x, off], loop), ENTRY,
            [np.asarray([1, 2, 4, 8], np.float32), scalar_array(0)])


# (builder, check, a substring of the message) for inputs failing the check; the same builder
# with in-range arguments is the control
COMPUTED = [
    (lambda: _computed_gather([[0, 5, 2]]), lambda: _computed_gather([[0, 4, 2]]),
     "index_range", "Gather: index 5 at indices[0, 1] is outside [0, 5) on axis 1"),
    (lambda: _computed_gather([[-3, 1, 2]]), lambda: _computed_gather([[1, 1, 3]]),
     "index_range", "Gather: index -3 at indices[0, 0] is outside [0, 5)"),
    (lambda: _computed_cache(2, 3), lambda: _computed_cache(1, 3), "cache_bounds",
     "CacheUpdate: cur_pos + s = 2 + 3 = 5 exceeds cache.len = 4"),
    (lambda: _computed_cache(-1, 1), lambda: _computed_cache(0, 1), "cache_bounds",
     "CacheUpdate: cur_pos = -1 is negative"),
    (lambda: _computed_cache(0, 0), lambda: _computed_cache(0, 2), "cache_bounds",
     "CacheUpdate: s = 0 is outside [1, new.len = 3]"),
    (lambda: _computed_insert(1, 3), lambda: _computed_insert(1, 2), "slice_window",
     "InsertSlice: axis 1: offset 3 places the window [3, 5)"),
    (lambda: _computed_insert(-1, 0), lambda: _computed_insert(0, 0), "slice_window",
     "InsertSlice: axis 0: offset -1"),
    (lambda: _computed_rope([0, 5, 1]), lambda: _computed_rope([0, 4, 1]), "index_range",
     "RoPE: pos_ids[1] = 5 is outside the cache positions [0, 5)"),
    (lambda: _loop_gather(5), lambda: _loop_gather(4), "index_range",
     "Gather: index 4 at indices[] is outside [0, 4) on axis 0"),
]


def _reference(built: tuple):
    m, e, ins = built
    ref = ReferenceBackend()
    return ref.run(ref.compile(m, e), ins)


@pytest.mark.parametrize("backend", [KernelInterpBackend(), SimdBackend(),
                                     KernelInterpBackend(fuse=False)],
                         ids=["kernel-interp", "simd", "kernel-interp-unfused"])
@pytest.mark.parametrize("bad, good, name, msg", COMPUTED,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(COMPUTED)])
def test_computed_operands_are_checked_after_the_launch(backend, bad, good, name, msg):
    m, e, ins = bad()
    with pytest.raises(RunTimeCheckError) as ref_info:  # the reference agrees it fails
        _reference((m, e, ins))
    assert ref_info.value.check == name
    with pytest.raises(RunTimeCheckError) as info:
        backend.run(backend.compile(m, e), ins)
    assert info.value.check == name
    assert msg in str(info.value), str(info.value)
    # the control: in range, the same program returns the reference's values
    built = good()
    m, e, ins = built
    got = backend.run(backend.compile(m, e), ins)
    v = check(m, e, ins, got)
    assert v.status == "PASS", v.summary()


def test_where_each_check_runs():
    """Inputs are checked on the host before the launch (no check kernel); a computed operand
    gets a check kernel and probe outputs; an executable returns the result alone."""
    cat = build_catalog(0)
    m, e, ins = cat["spec/run-time-check/index_range/gather-index-at-extent/f32"].build()
    c = compile(m, e, [x.shape for x in ins])
    assert [k.check for k in c.checks.host] == ["index_range"] and not c.checks.probed
    assert not any("check" in k.name for k in c.kernels)
    m, e, ins = _computed_gather([[0, 4, 2]])
    c = compile(m, e, [x.shape for x in ins], fuse=False)
    assert not c.checks.host and [k.check for k in c.checks.probed] == ["index_range"]
    assert any("check_gather" in k.name for k in c.kernels)
    assert isinstance(c.program.outputs, tuple) and len(c.program.outputs) == 3
    out = c(ins)
    assert isinstance(out, np.ndarray) and out.shape == (2, 1, 3)



def _const_gather(idx: list) -> tuple:
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    x = make_var("x", a.shape, F32)
    return (make_module([x], make_call(Gather(axis=1), x, Constant(np.asarray(idx, np.int32)))), ENTRY,
            [a])


def _reshaped_gather(idx: list) -> tuple:
    """The indices are a view (Reshape) of an input: an alias buffer, checked on the host."""
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    i = np.asarray(idx, np.int32)
    x, iv = make_var("x", a.shape, F32), make_var("i", i.shape, I32)
    j = make_call(Reshape(new_shape=(1, len(idx))), iv)
    return make_module([x, iv], make_call(Gather(axis=1), x, j)), ENTRY, [a, i]


@pytest.mark.parametrize("backend", [KernelInterpBackend(), SimdBackend()],
                         ids=lambda b: b.name)
@pytest.mark.parametrize("make, bad, good, msg", [
    (_const_gather, [3, 7], [3, 4], "Gather: index 7 at indices[1] is outside [0, 5) on axis 1"),
    (_reshaped_gather, [0, 2, -2], [0, 2, 1],
     "Gather: index -2 at indices[0, 2] is outside [0, 5) on axis 1"),
], ids=["constant", "reshaped-input"])
def test_constants_and_views_of_inputs_are_checked_on_the_host(backend, make, bad, good, msg):
    m, e, ins = make(bad)
    c = compile(m, e, [x.shape for x in ins])
    assert len(c.checks.host) == 1 and not c.checks.probed
    with pytest.raises(RunTimeCheckError, match=r"index_range|Gather") as info:
        backend.run(backend.compile(m, e), ins)
    assert info.value.check == "index_range" and msg in str(info.value), str(info.value)
    m, e, ins = make(good)
    v = check(m, e, ins, backend.run(backend.compile(m, e), ins))
    assert v.status == "PASS", v.summary()


def test_a_dispatch_call_outside_its_envelope_at_elaboration_is_the_check(monkeypatch, catalog):
    """Elaboration's "outside the dispatch envelope" error (``typeinfer.functions._select``) is
    exactly the ``dispatch_envelope`` check and becomes ``RunTimeCheckError``; any other type
    error propagates unchanged."""
    import tilefoundry.compiler.backends as be
    from tilefoundry.semantics.typeinfer.core import TypeInferError

    m, e, ins = catalog["spec/function/dispatch-large/f32"].build()
    backend = KernelInterpBackend()
    prog = backend.compile(m, e)
    envelope = TypeInferError("M = 9 is outside the dispatch envelope [2, 9); it matches no "
                              "variant and there is no base body to fall back to",
                              op="Call @g", rule="Dispatch resolution")
    other = TypeInferError("M = 3 matches 2 variants", op="Call @g",
                           rule="Envelope coverage: every in-envelope shape selects exactly "
                           "one variant")
    for err, want in ((envelope, RunTimeCheckError), (other, TypeInferError)):
        def fail(*a, err=err, **k):
            raise err

        monkeypatch.setattr(be, "compile", fail)
        prog.cache.clear()
        with pytest.raises(want) as info:
            backend.run(prog, ins)
        if want is RunTimeCheckError:
            assert info.value.check == "dispatch_envelope" and info.value.__cause__ is err
            assert "Call @g: M = 9 is outside the dispatch envelope [2, 9)" in str(info.value)
        else:
            assert info.value is err
