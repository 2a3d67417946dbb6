"""Planted bugs: the ``fuse`` pass followed by one realistic miscompilation each.

Each bug is a function ``Program -> Program | None`` applied to the fused kernel IR (None: the
program offers no site for it). ``PLANTED`` names them; ``SAMPLES`` gives, per bug, a small HIR
program with a site; ``planted_backend(name)`` is a ``kernel-interp`` conformance backend whose
compiled programs carry the bug (``--backend tilefoundry.validate.planted:drop_rounding``), so
the same bugs can be run through ``conformance run`` / ``fuzz`` beside the validator.

| bug | what it does |
|---|---|
| ``drop_rounding`` | a ``widen(round(x -> narrow) -> f32)`` pair forwarded as ``x``: the intermediate rounding of a fused bf16 chain dropped |
| ``swap_operands`` | the operands of the first ``sub`` / ``div`` swapped |
| ``edge_mask_off_by_one`` | the first ``edge_mask`` on a ragged axis becomes ``coord < extent - 1`` |
| ``reassociate_ordered_tree`` | an ``ordered_tree`` sum split into interleaved partial sums (even + odd lanes): ``(x0 + x2) + (x1 + x3)``, outside the admitted set (a left fold would be inside it) |
| ``fold_mul_one`` | ``x * 1.0 -> x`` (valid under the NaN-class rule: the validator proves it) |
| ``fold_add_zero`` | ``x + 0.0 -> x`` (wrong for x = -0: -0 + +0 = +0) |

Four more are bugs of the per-device lowering of sharded programs (``MESH_PLANTED``): each is a
function ``MeshProgram -> MeshProgram | None`` on the compiled mesh program's steps and slots
(``lower_mesh.compile_mesh``), validated by the ``lower`` check of a sharded program
(``mesh_passes.check_mesh_lowering``). Their samples are quick-tier case ids (``MESH_SAMPLES``,
built by ``mesh_sample``); their planted backends mutate the mesh program of every sharded
program they compile (and leave single-device programs alone, as the six above leave sharded
ones).

| bug | what it does |
|---|---|
| ``drop_all_reduce`` | the first ``all_reduce`` removed, its readers reading its source: every device keeps its own Partial piece |
| ``swap_launch_operands`` | the first two inputs of the first launch that has two distinct inputs of one dtype and shape swapped |
| ``wrong_partial_reduction`` | the source slot of the first ``all_reduce`` relabeled with another reduction (Partial(max) / Partial(min) completed as a sum, Partial(sum) as a max) |
| ``gather_wrong_ownership`` | the first ``gather_mask`` (a Gather along a split axis) given the global extent as its block size: device 0 keeps every row it gathered, owned or not |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Kernel, Program
from tilefoundry.compiler.mesh_ir import Collective, DeviceLaunch, MeshLoop, MeshProgram
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.types import Partial, ShardLayout

__all__ = ["MESH_PLANTED", "MESH_SAMPLES", "PLANTED", "SAMPLES", "mesh_sample", "plant",
           "planted_backend"]


def _map_kernels(p: Program, fn: Callable[[Kernel], Kernel | None]) -> Program | None:
    """Apply ``fn`` to the first kernel it changes (None: unchanged)."""
    done = False

    def walk(steps: tuple) -> tuple:
        nonlocal done
        out = []
        for s in steps:
            if done:
                out.append(s)
            elif isinstance(s, Kernel):
                k = fn(s)
                if k is not None:
                    done = True
                out.append(k or s)
            elif isinstance(s, kir.HostLoop):
                out.append(replace(s, body=walk(s.body)))
            else:  # another step kind (none in the single-device pipeline): left alone
                out.append(s)
        return tuple(out)

    steps = walk(p.steps)
    return replace(p, steps=steps) if done else None


def _rewrite_body(body: tuple, fn: Callable[[kir.Instr, dict], list | None],
                  state: dict) -> tuple:
    """Rewrite the first instruction ``fn`` returns a replacement for; rename later uses."""
    out: list = []
    for ins in body:
        ins = ins.renamed(state.setdefault("rename", {}))
        if isinstance(ins, kir.TileLoop):
            ins = replace(ins, body=_rewrite_body(ins.body, fn, state),
                          yields=tuple(state["rename"].get(y, y) for y in ins.yields))
            out.append(ins)
            continue
        new = None if state.get("done") else fn(ins, state)
        if new is None:
            out.append(ins)
        else:
            state["done"] = True
            out.extend(new)
    return tuple(out)


def _body_bug(fn: Callable[[kir.Instr, dict, Kernel], list | None]) -> Callable:
    def apply(p: Program) -> Program | None:
        def on_kernel(k: Kernel) -> Kernel | None:
            state: dict[str, Any] = {"types": kir.kernel_types(k, p.buffer_map()), "defs": {},
                                     "consts": {
                b.name: b.data for b in p.buffers if b.kind == "const" and kir.is_float(b.dtype)}}
            for ins in kir.iter_instrs(k.body):
                for r in ins.results():
                    state["defs"][r] = ins
            body = _rewrite_body(k.body, lambda i, s: fn(i, s, k), state)
            return replace(k, body=body) if state.get("done") else None

        return _map_kernels(p, on_kernel)

    return apply


def _drop_rounding(ins: kir.Instr, st: dict, k: Kernel) -> list | None:
    if isinstance(ins, kir.Widen) and ins.to == "f32":
        src = st["defs"].get(ins.x)
        if isinstance(src, kir.Round) and st["defs"].get(src.x) is not None and \
                st["types"][src.x].dtype == "f32" and st["types"][src.x].full == \
                st["types"][ins.out].full:
            st["rename"][ins.out] = src.x
            return []
    return None


def _swap(ins: kir.Instr, st: dict, k: Kernel) -> list | None:
    if isinstance(ins, kir.BinOp) and ins.kind in ("sub", "div") and ins.a != ins.b:
        return [replace(ins, a=ins.b, b=ins.a)]
    return None


def _edge_off_by_one(ins: kir.Instr, st: dict, k: Kernel) -> list | None:
    if isinstance(ins, kir.EdgeMask):
        axes = [d for d in ins.axes if k.domain[d] > 1 and k.ragged(d)]
        if axes:
            d = axes[0]
            c, e = f"{ins.out}_obo_c", f"{ins.out}_obo_e"
            return [kir.Coord(c, d), kir.Const(e, k.domain[d] - 1, "i64"),
                    kir.BinOp(ins.out, "lt", c, e)]
    return None


def _reassociate(ins: kir.Instr, st: dict, k: Kernel) -> list | None:
    """An ``ordered_tree`` sum split into interleaved partial sums (even lanes + odd lanes, as
    a two-accumulator SIMD loop would): ``(x0 + x2) + (x1 + x3)`` combines lanes that are not
    adjacent, which no bracketing in source order does."""
    if not (isinstance(ins, kir.Reduce) and ins.policy == "ordered_tree" and ins.kind == "sum"
            and len(ins.axes) == 1):
        return None
    d, o = ins.axes[0], ins.out
    out = [kir.Coord(f"{o}_c", d), kir.Const(f"{o}_2", 2, "i64"), kir.Const(f"{o}_0", 0, "i64"),
           kir.BinOp(f"{o}_r", "mod", f"{o}_c", f"{o}_2"),
           kir.BinOp(f"{o}_ev", "eq", f"{o}_r", f"{o}_0"), kir.UnOp(f"{o}_od", "not", f"{o}_ev")]
    ev, od = f"{o}_ev", f"{o}_od"
    if ins.mask:
        out += [kir.BinOp(f"{o}_evm", "and", ev, ins.mask),
                kir.BinOp(f"{o}_odm", "and", od, ins.mask)]
        ev, od = f"{o}_evm", f"{o}_odm"
    out += [replace(ins, out=f"{o}_se", mask=ev),
            replace(ins, out=f"{o}_so", mask=od, init=None),
            kir.BinOp(o, "add", f"{o}_se", f"{o}_so")]
    return out


def _is_const(st: dict, name: str, value: float) -> bool:
    """``name`` is the float constant ``value`` (a ``const`` instruction, or a load of a
    constant buffer holding only it)."""
    d = st["defs"].get(name)
    if isinstance(d, kir.Const):
        return d.value == value and kir.is_float(d.dtype)
    if isinstance(d, kir.Load) and not d.index and d.buffer in st["consts"]:
        data = st["consts"][d.buffer]
        return data.size > 0 and bool((data.astype("f8") == value).all())
    return False


def _fold_identity(kind: str, value: float) -> Callable:
    def fn(ins: kir.Instr, st: dict, k: Kernel) -> list | None:
        if isinstance(ins, kir.BinOp) and ins.kind == kind:
            for x, c in ((ins.a, ins.b), (ins.b, ins.a)):
                if _is_const(st, c, value):
                    st["rename"][ins.out] = x
                    return []
        return None

    return fn


PLANTED: dict[str, Callable[[Program], Program | None]] = {
    "drop_rounding": _body_bug(_drop_rounding),
    "swap_operands": _body_bug(_swap),
    "edge_mask_off_by_one": _body_bug(_edge_off_by_one),
    "reassociate_ordered_tree": _body_bug(_reassociate),
    "fold_mul_one": _body_bug(_fold_identity("mul", 1.0)),
    "fold_add_zero": _body_bug(_fold_identity("add", 0.0)),
}


# ---------------------------------------------------------------------------------------------
# mesh bugs: the compiled MeshProgram of a sharded program, its steps or slots mutated
# ---------------------------------------------------------------------------------------------
def _first_step(steps: tuple, pred: Callable[[Any], bool]) -> Any:
    """The first step (loop bodies included, in program order) ``pred`` holds for; None."""
    for s in steps:
        if pred(s):
            return s
        if isinstance(s, MeshLoop):
            hit = _first_step(s.body, pred)
            if hit is not None:
                return hit
    return None


def _splice(steps: tuple, old: Any, new: tuple) -> tuple:
    """``steps`` with the step ``old`` (by identity, loop bodies included) replaced by ``new``."""
    out: list = []
    for s in steps:
        if s is old:
            out.extend(new)
        elif isinstance(s, MeshLoop):
            out.append(replace(s, body=_splice(s.body, old, new)))
        else:
            out.append(s)
    return tuple(out)


def _rename_reads(steps: tuple, old: str, new: str) -> tuple:
    """Every read of slot ``old`` (launch inputs, collective sources, loop inits and yields)
    reads ``new`` instead."""
    def r(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if n == old else n for n in names)

    out: list = []
    for s in steps:
        if isinstance(s, DeviceLaunch):
            out.append(replace(s, inputs=r(s.inputs)))
        elif isinstance(s, Collective):
            out.append(replace(s, srcs=r(s.srcs)))
        else:
            out.append(replace(s, inits=r(s.inits), yields=r(s.yields),
                               body=_rename_reads(s.body, old, new)))
    return tuple(out)


def _is_all_reduce(s: Any) -> bool:
    return isinstance(s, Collective) and s.kind == "all_reduce"


def _drop_all_reduce(mp: MeshProgram) -> MeshProgram | None:
    ar = _first_step(mp.steps, _is_all_reduce)
    if ar is None:
        return None
    src = ar.srcs[0]
    steps = _rename_reads(_splice(mp.steps, ar, ()), ar.dst, src)
    return replace(mp, steps=steps, outputs=tuple(src if o == ar.dst else o
                                                  for o in mp.outputs))


def _operand_pair(s: DeviceLaunch, mp: MeshProgram) -> tuple[int, int] | None:
    """The first two distinct inputs of launch ``s`` whose slots have one dtype and shape."""
    sm = mp.slot_map()
    for j, b in enumerate(s.inputs):
        for i, a in enumerate(s.inputs[:j]):
            if a != b and (sm[a].dtype, sm[a].shape) == (sm[b].dtype, sm[b].shape):
                return i, j
    return None


def _swap_launch_operands(mp: MeshProgram) -> MeshProgram | None:
    ln = _first_step(mp.steps, lambda s: isinstance(s, DeviceLaunch) and
                     _operand_pair(s, mp) is not None)
    if ln is None:
        return None
    i, j = _operand_pair(ln, mp)
    ins = list(ln.inputs)
    ins[i], ins[j] = ins[j], ins[i]
    return replace(mp, steps=_splice(mp.steps, ln, (replace(ln, inputs=tuple(ins)),)))


#: the reduction a wrong completion uses instead of the Partial's own
_WRONG_REDUCTION = {"sum": "max", "max": "sum", "min": "sum"}


def _wrong_partial_reduction(mp: MeshProgram) -> MeshProgram | None:
    ar = _first_step(mp.steps, _is_all_reduce)
    if ar is None:
        return None
    name = ar.srcs[0]
    lay = mp.slot_map()[name].layout
    attrs = tuple(Partial(_WRONG_REDUCTION[a.reduction]) if isinstance(a, Partial) and
                  i in ar.axes else a for i, a in enumerate(lay.attrs))
    wrong = ShardLayout(lay.mesh, attrs, lay.layout)
    return replace(mp, slots=tuple(replace(s, layout=wrong) if s.name == name else s
                                   for s in mp.slots))


def _gather_wrong_ownership(mp: MeshProgram) -> MeshProgram | None:
    gm = _first_step(mp.steps, lambda s: isinstance(s, Collective) and s.kind == "gather_mask"
                     and s.attrs[1] != s.attrs[0])
    if gm is None:
        return None
    n_glob, _blk, axis = gm.attrs
    return replace(mp, steps=_splice(mp.steps, gm, (replace(gm, attrs=(n_glob, n_glob,
                                                                         axis)),)))


MESH_PLANTED: dict[str, Callable[[MeshProgram], MeshProgram | None]] = {
    "drop_all_reduce": _drop_all_reduce,
    "swap_launch_operands": _swap_launch_operands,
    "wrong_partial_reduction": _wrong_partial_reduction,
    "gather_wrong_ownership": _gather_wrong_ownership,
}

#: per mesh bug, the quick-tier case (catalog seed 0) whose compiled mesh program has its site
MESH_SAMPLES: dict[str, str] = {
    "drop_all_reduce": "sharded/matmul/split-k-partial-sum/i32",
    "swap_launch_operands": "sharded/elementwise/mesh2d-split-split/f32",
    "wrong_partial_reduction": "spec/reshard/partial-max-completion/f32",
    "gather_wrong_ownership":
        "sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32",
}


def mesh_sample(name: str) -> tuple[Any, str, list]:
    """``(module, entry, inputs)`` of mesh bug ``name``'s sample (built from the catalog)."""
    from tilefoundry.conformance.catalog import build_catalog

    if name not in MESH_SAMPLES:
        raise InvalidArgumentError(f"unknown mesh planted bug {name!r}; choose one of "
                                   f"{', '.join(MESH_SAMPLES)}")
    cid = MESH_SAMPLES[name]
    case = next((c for c in build_catalog(0).tier("quick") if c.id == cid), None)
    if case is None:
        raise InvalidArgumentError(f"mesh planted bug {name!r}: its sample {cid!r} is no "
                                   f"longer a quick-tier case of catalog seed 0; name another "
                                   f"case with the bug's site in MESH_SAMPLES")
    m, e, xs = case.build()
    return m, e, list(xs)


def plant(name: str, program: Any, *, verify: bool = True) -> Any:
    """``program`` with bug ``name`` planted (None: no site), verified unless ``verify`` is
    False (the planted backends run it unverified, as a buggy pass's output would run: the
    verifier cannot tell an off-by-one mask from an edge mask and would refuse it). A bug of
    ``PLANTED`` takes a kernel-IR ``Program``, one of ``MESH_PLANTED`` a ``MeshProgram``
    (``compile_mesh(...).program``; verified by ``verify_mesh``, which refuses some of them,
    e.g. a dropped all-reduce's replicate of a Partial slot)."""
    if name in MESH_PLANTED:
        if not isinstance(program, MeshProgram):
            raise InvalidArgumentError(f"planted bug {name!r} mutates a sharded program's "
                                       f"MeshProgram (compile_mesh(...).program), got "
                                       f"{type(program).__name__}; pass the mesh program, or "
                                       f"choose one of {', '.join(PLANTED)}")
        out = MESH_PLANTED[name](program)
        if out is not None and verify:
            from tilefoundry.compiler.mesh_ir import verify_mesh

            verify_mesh(out)
        return out
    if name not in PLANTED:
        raise InvalidArgumentError(f"unknown planted bug {name!r}; choose one of "
                                   f"{', '.join([*PLANTED, *MESH_PLANTED])}")
    if not isinstance(program, Program):
        raise InvalidArgumentError(f"planted bug {name!r} mutates a kernel-IR Program, got "
                                   f"{type(program).__name__}; pass the program, or choose "
                                   f"one of {', '.join(MESH_PLANTED)} for a MeshProgram")
    out = PLANTED[name](program)
    if out is not None and verify:
        kir.verify(out)
    return out


def _samples() -> dict[str, tuple[Any, str, list[tuple[int, ...]]]]:
    from tilefoundry.semantics.dsl import DimVar, Tensor, bf16, f32, func, module, reduce_sum

    n = DimVar("N", 1, 1 << 20)

    @func
    def chain(x: Tensor[(n,), bf16], y: Tensor[(n,), bf16],
              z: Tensor[(n,), bf16]) -> Tensor[(n,), bf16]:
        return x * y + z

    @func
    def diff(x: Tensor[(n,), f32], y: Tensor[(n,), f32]) -> Tensor[(n,), f32]:
        return x - y

    @func
    def tree(x: Tensor[(n,), f32]) -> Tensor[(1,), f32]:
        return reduce_sum(x, (0,), policy="ordered_tree")

    @func
    def times_one(x: Tensor[(n,), f32]) -> Tensor[(n,), f32]:
        return x * 1.0

    @func
    def plus_zero(x: Tensor[(n,), f32]) -> Tensor[(n,), f32]:
        return x + 0.0

    m = module(chain, diff, tree, times_one, plus_zero)
    return {"drop_rounding": (m, "chain", [(4,)] * 3),
            "swap_operands": (m, "diff", [(4,), (4,)]),
            "edge_mask_off_by_one": (m, "diff", [(3,), (3,)]),
            "reassociate_ordered_tree": (m, "tree", [(4,)]),
            "fold_mul_one": (m, "times_one", [(2,)]),
            "fold_add_zero": (m, "plus_zero", [(2,)])}


SAMPLES = _samples()
#: the module of the samples (``tilefoundry validate tilefoundry.validate.planted:SAMPLE_MODULE``)
SAMPLE_MODULE = SAMPLES["swap_operands"][0]


def planted_backend(name: str) -> Any:
    """A ``kernel-interp`` backend whose compiled programs carry bug ``name``: the
    single-device programs for a bug of ``PLANTED``, the sharded programs' mesh programs for
    one of ``MESH_PLANTED`` (the other kind of program compiled clean)."""
    from tilefoundry.compiler.backends import KernelInterpBackend
    from tilefoundry.compiler.interp import Interpreter

    if name not in PLANTED and name not in MESH_PLANTED:
        raise InvalidArgumentError(f"unknown planted bug {name!r}; choose one of "
                                   f"{', '.join([*PLANTED, *MESH_PLANTED])}")
    mesh_bug = name in MESH_PLANTED

    class Planted(KernelInterpBackend):
        def compiled_for(self, prog, shapes):  # type: ignore[override]
            hit = super().compiled_for(prog, shapes)
            if getattr(hit, "_planted", False):
                return hit
            if mesh_bug and prog.mesh:  # a MeshCompiled: its launches' executables stay
                bad = plant(name, hit.program, verify=False)
                if bad is not None:
                    hit.program = bad
            elif not mesh_bug and not prog.mesh:
                bad = plant(name, hit.program, verify=False)
                if bad is not None:
                    hit.program = bad
                    hit.executable = Interpreter(bad, hit.checks)
            hit._planted = True
            return hit

    b = Planted()
    b.name = f"planted-{name}"
    return b


def drop_rounding() -> Any:
    return planted_backend("drop_rounding")


def swap_operands() -> Any:
    return planted_backend("swap_operands")


def edge_mask_off_by_one() -> Any:
    return planted_backend("edge_mask_off_by_one")


def reassociate_ordered_tree() -> Any:
    return planted_backend("reassociate_ordered_tree")


def fold_add_zero() -> Any:
    return planted_backend("fold_add_zero")


def fold_mul_one() -> Any:
    return planted_backend("fold_mul_one")


def drop_all_reduce() -> Any:
    return planted_backend("drop_all_reduce")


def swap_launch_operands() -> Any:
    return planted_backend("swap_launch_operands")


def wrong_partial_reduction() -> Any:
    return planted_backend("wrong_partial_reduction")


def gather_wrong_ownership() -> Any:
    return planted_backend("gather_wrong_ownership")
