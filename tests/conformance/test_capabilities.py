"""Capabilities a real backend can state (issue 22, deliverable 2): per op x dtype, per
attribute value (Cast modes, reduction policies per op), structural features (tuples, calls,
loops, dispatch), mesh shapes; the default claims nothing it was not told (D247); and
``conformance probe``, which derives a set by running one tiny case per op x dtype.

Issue 22: 'dtypes apply to every op (claiming bool for comparisons also claims `Cast -> bool`
and `Reduce` on bool); nothing per op x dtype, per Cast mode ...; tuples, calls, loops and
dispatch cannot be declared ... `policies` defaults to all four'."""

from __future__ import annotations

import json

import pytest

from tilefoundry.cli import main
from tilefoundry.conformance.backend import (
    ALL_FEATURES,
    ALL_POLICIES,
    BUILTIN,
    Capabilities,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.selection import ConformanceError, validate_capabilities
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.ops.tensor import Cast, Reduce, ReduceKind
from tilefoundry.semantics.types import TensorType

F32, BOOL = DType.F32, DType.BOOL


def _one(op, dt: DType = F32, n: int = 4, arity: int = 1) -> Module:
    xs = tuple(Var(f"x{i}", TensorType((n,), dt)) for i in range(arity))
    return Module((Function("f", xs, Call(op, xs), None),))


def _why(caps: Capabilities, module: Module) -> str | None:
    return unsupported_reason(caps, requirements(module))


LT = _one(Binary(BinaryKind.LT), arity=2)
CAST_BOOL = _one(Cast(BOOL))
SUM_F32 = _one(Reduce(axes=(0,), keepdim=False, kind=ReduceKind.SUM, policy="unordered_tree"))
MAX_F32 = _one(Reduce(axes=(0,), keepdim=False, kind=ReduceKind.MAX, policy="unordered_tree"))


def test_the_default_claims_nothing():
    c = Capabilities()
    assert c.ops == frozenset() and c.dtypes == frozenset() and c.policies == frozenset()
    assert c.features == frozenset() and not c.mesh
    assert _why(c, LT) == "op(s) ['Binary.lt'] not in the backend's capabilities"
    # ops claimed, the rest not: each missing piece is named
    assert _why(Capabilities(ops=frozenset({"Binary"})), LT) == \
        "dtype(s) ['bool', 'f32'] not supported"
    assert _why(Capabilities(ops=frozenset({"Reduce"}), dtypes=frozenset({F32})), SUM_F32) == \
        "reduction policy(ies) ['unordered_tree'] not supported"
    assert _why(Capabilities.everything(), SUM_F32) is None


def test_per_op_dtypes_keep_a_comparisons_bool_from_claiming_cast_and_reduce_on_bool():
    caps = Capabilities(ops=frozenset({"Binary", "Cast", "Reduce"}),
                        dtypes=frozenset({F32, BOOL}), policies=ALL_POLICIES,
                        overflow_modes=frozenset({"nonfinite"}),
                        rounding_modes=frozenset({"nearest"}),
                        op_dtypes={"Cast": frozenset({F32}), "Reduce": frozenset({F32})})
    assert _why(caps, LT) is None  # f32 operands, a bool result: Binary is not narrowed
    assert _why(caps, CAST_BOOL) == "op x dtype Cast on bool not supported (op_dtypes)"
    reduce_bool = _one(Reduce(axes=(0,), keepdim=False, kind=ReduceKind.MAX,
                              policy="unordered_tree"), BOOL)
    assert _why(caps, reduce_bool) == "op x dtype Reduce on bool not supported (op_dtypes)"
    assert _why(caps, SUM_F32) is None
    # a kind-level entry narrows that kind only
    kind = Capabilities(**{**caps.__dict__, "op_dtypes": {"Binary.lt": frozenset({BOOL})}})
    assert _why(kind, LT) == "op x dtype Binary.lt on f32 not supported (op_dtypes)"


def test_per_op_attribute_values():
    caps = Capabilities.everything(op_attrs={"Reduce.sum": {"policy": frozenset({"fold_left"})},
                                             "Cast": {"rounding": frozenset({"nearest"})}})
    assert _why(caps, SUM_F32) == "Reduce.sum with policy='unordered_tree' not supported " \
                                  "(op_attrs['Reduce.sum']['policy'] = ['fold_left'])"
    assert _why(caps, MAX_F32) is None  # the other kinds keep the global policies
    assert _why(caps, _one(Cast(DType.F8E8M0, rounding="up"))) == \
        "Cast with rounding='up' not supported (op_attrs['Cast']['rounding'] = ['nearest'])"
    assert _why(caps, _one(Cast(DType.BF16))) is None
    # the global rounding modes apply to every Cast
    assert _why(Capabilities.everything(rounding_modes=frozenset({"nearest"})),
                _one(Cast(DType.F8E8M0, rounding="down"))) == \
        "rounding mode(s) ['down'] not supported"


def _calls() -> Module:
    x = Var("x", TensorType((4,), F32))
    y = Var("y", TensorType((4,), F32))
    g = Function("g", (y,), Call(Binary(BinaryKind.ADD), (y, y)), None)
    return Module((g, Function("f", (x,), Call(g, (x,)), None)))


def _tuples() -> Module:
    x = Var("x", TensorType((4,), F32))
    return Module((Function("f", (x,), Tuple((Call(Binary(BinaryKind.ADD), (x, x)), x)),
                            None),))


def _catalog_case(pred):
    from tilefoundry.conformance.catalog import build_catalog

    for c in build_catalog(0).tier("quick"):
        if c.expect_error is None and pred(c.id):
            m = c.build()[0]
            yield m, requirements(m)


def test_structural_features_are_declared_or_not_supported():
    no_features = Capabilities.everything(features=frozenset())
    assert requirements(_calls()).features == {"calls"}
    assert _why(no_features, _calls()) == "feature(s) ['calls'] not in the backend's " \
                                          "capabilities (declare them in Capabilities.features)"
    assert requirements(_tuples()).features == {"tuples"}
    assert _why(Capabilities.everything(features=frozenset({"calls"})), _tuples()).startswith(
        "feature(s) ['tuples']")
    loop = next((m, r) for m, r in _catalog_case(lambda i: True) if "loops" in r.features)
    assert _why(Capabilities.everything(features=ALL_FEATURES - {"loops"}), loop[0]) \
        .startswith("feature(s) ['loops']")
    assert _why(Capabilities.everything(), loop[0]) is None


def test_mesh_shapes():
    m, r = next((m, r) for m, r in _catalog_case(lambda i: i.startswith("sharded/")) if r.mesh)
    (shape, *_) = sorted(r.mesh_shapes)
    assert _why(Capabilities.everything(mesh=True), m) is None
    assert _why(Capabilities.everything(mesh=True, mesh_shapes=frozenset({shape})), m) is None \
        or len(r.mesh_shapes) > 1
    assert _why(Capabilities.everything(mesh=True, mesh_shapes=frozenset({(7, 7)})), m) == \
        f"mesh shape(s) {sorted(r.mesh_shapes)} not supported (mesh_shapes [(7, 7)])"
    assert _why(Capabilities.everything(mesh=False), m) == \
        "sharded programs (mesh simulation) not supported"


@pytest.mark.parametrize(("caps", "pattern"), [
    (Capabilities.everything(features=frozenset({"loop"})),
     "unknown feature 'loop' (closest valid name: 'loops')"),
    (Capabilities.everything(op_dtypes={"Binray": frozenset({F32})}),
     "op_dtypes: unknown op 'Binray' (closest valid name: 'Binary')"),
    (Capabilities.everything(op_dtypes={"Cast": frozenset({"bf61"})}),
     "op_dtypes['Cast']: unknown dtype 'bf61' (closest valid name: 'bf16')"),
    (Capabilities.everything(op_attrs={"Reduce": {"polcy": frozenset({"fold_left"})}}),
     "op_attrs['Reduce']: unknown attribute 'polcy' (closest valid name: 'policy')"),
    (Capabilities.everything(op_attrs={"Reduce": {"policy": frozenset({"fold-left"})}}),
     "op_attrs['Reduce']['policy']: unknown policy 'fold-left' (closest valid name: "
     "'fold_left')"),
    (Capabilities.everything(rounding_modes=frozenset({"nearst"})),
     "unknown rounding mode 'nearst' (closest valid name: 'nearest')"),
    (Capabilities.everything(mesh=True, mesh_shapes=frozenset({(0,)})),
     "mesh_shapes must be None or a set of tuples of positive ints"),
])
def test_unknown_names_in_the_new_fields_name_the_closest(caps, pattern):
    with pytest.raises(ConformanceError) as e:
        validate_capabilities(caps, "x:y")
    assert pattern in str(e.value), str(e.value)


def test_json_round_trip_and_capabilities_file(tmp_path, monkeypatch, capsys):
    c = Capabilities(ops=frozenset({"Binary.add", "Cast"}), dtypes=frozenset({F32, BOOL}),
                     policies=frozenset({"fold_left"}), rounding_modes=frozenset({"nearest"}),
                     features=frozenset({"tuples"}), mesh=True,
                     mesh_shapes=frozenset({(2,), (2, 2)}),
                     op_dtypes={"Cast": frozenset({F32})},
                     op_attrs={"Cast": {"overflow": frozenset({"saturate"})}})
    j = c.to_json()
    assert j["mesh_shapes"] == [[2], [2, 2]] and j["op_dtypes"] == {"Cast": ["f32"]}
    back = validate_capabilities(Capabilities.from_json(json.loads(json.dumps(j))), "x:y")
    assert back.to_json() == j
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"ops": [], "feature": []}')
    rc = main(["conformance", "run", "--backend", "reference", "--capabilities", "bad.json",
               "--jsonl", "r.jsonl"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "unknown key(s) ['feature']" in err, err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("name", ["reference", "kernel-interp", "simd", "distributed",
                                  "cuda-host"])
def test_every_builtin_backend_states_valid_capabilities(name):
    """The built-in backends declare what they run explicitly (nothing comes from defaults)."""
    from tilefoundry.conformance.selection import _load_backend_checked

    try:
        _, caps = _load_backend_checked(name)
    except ConformanceError as e:  # an optional dependency missing on this machine
        pytest.skip(str(e))
    assert name in BUILTIN
    assert caps.dtypes and caps.policies and caps.overflow_modes and caps.rounding_modes
    assert caps.features == ALL_FEATURES


def test_probe_derives_what_the_backend_runs(tmp_path, monkeypatch, capsys):
    """probe_backend.py runs Binary.add / Binary.mul on f32 and bf16 (and Cast between them)
    and refuses the rest; it declares nothing. The probe finds exactly that, and a run with
    the derived set has no ERROR: what the backend refuses is NOT_SUPPORTED by declaration."""
    monkeypatch.chdir(tmp_path)
    globs = ["--cases", "special/binary/*"]
    rc = main(["conformance", "probe", "--backend", "probe_backend:factory", *globs,
               "--out", "caps.json", "-j", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    caps = json.loads((tmp_path / "caps.json").read_text())
    assert caps["ops"] == ["Binary.add", "Binary.mul"]
    assert caps["dtypes"] == ["bf16", "f32"] and caps["features"] == [] and not caps["mesh"]
    assert caps["op_dtypes"] == {"Binary.add": ["bf16", "f32"], "Binary.mul": ["bf16", "f32"]}
    assert "rejected NOT_SUPPORTED" in out and "accepted" in out
    rc = main(["conformance", "run", "--backend", "probe_backend:factory", "--capabilities",
               "caps.json", *globs, "--jsonl", "r.jsonl", "--no-progress"])
    recs = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    verdicts = {r["verdict"] for r in recs if r["type"] == "case"}
    assert rc == 0 and verdicts == {"PASS", "NOT_SUPPORTED"}, verdicts
