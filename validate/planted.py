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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Kernel, Program

__all__ = ["PLANTED", "SAMPLES", "plant", "planted_backend"]


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


def plant(name: str, program: Program, *, verify: bool = True) -> Program | None:
    """``program`` with bug ``name`` planted (None: no site), verified unless ``verify`` is
    False (the planted backends run it unverified, as a buggy pass's output would run: the
    verifier cannot tell an off-by-one mask from an edge mask and would refuse it)."""
    if name not in PLANTED:
        from tilefoundry.errors import InvalidArgumentError

        raise InvalidArgumentError(f"unknown planted bug {name!r}; choose one of "
                                   f"{', '.join(PLANTED)}")
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
    """A ``kernel-interp`` backend whose compiled programs carry bug ``name``."""
    from tilefoundry.compiler.backends import KernelInterpBackend
    from tilefoundry.compiler.interp import Interpreter

    class Planted(KernelInterpBackend):
        def compiled_for(self, prog, shapes):  # type: ignore[override]
            hit = super().compiled_for(prog, shapes)
            if not prog.mesh and not getattr(hit, "_planted", False):  # single-device only
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
