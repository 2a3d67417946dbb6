"""The kernel IR's printer (split out of ``compiler/kir.py``, D440): ``to_text`` prints a program
or kernel with the types of the current block. ``compiler/kir.py`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.kir import (
    BinOp,
    Bitcast,
    Broadcast,
    Buffer,
    Cast,
    Const,
    Coord,
    Dot,
    EdgeMask,
    Instr,
    Kernel,
    Load,
    Math,
    Program,
    Reduce,
    Round,
    Select,
    Store,
    Tile,
    TileLoop,
    UnOp,
    Widen,
    is_float,
)
from tilefoundry.compiler.kir_verify import _Checker


# =============================================================================================
# the printer
# =============================================================================================
def _lit(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _affine(strides: tuple[int, ...], offset: int, index: tuple) -> str:
    terms = [f"{s}*d{d}" if s != 1 else f"d{d}" for d, s in enumerate(strides) if s]
    terms += [f"{s}*{n}" if s != 1 else n for n, s in index]
    if offset or not terms:
        terms.append(str(offset))
    return " + ".join(terms)


def _axes(axes: Iterable[int]) -> str:
    return ", ".join(f"d{d}" for d in axes)


def _instr_text(ins: Instr, types: Mapping[str, Tile] | None, block: tuple[int, ...]) -> str:
    def ty(n: str) -> str:
        return f" : {types[n].text(block)}" if types is not None and n in types else ""

    def m(mask: str | None) -> str:
        return f" mask {mask}" if mask else ""

    if isinstance(ins, Const):
        return f"{ins.out} = const {_lit(ins.value)}{ty(ins.out) or ' : ' + ins.dtype}"
    if isinstance(ins, Coord):
        return f"{ins.out} = coord d{ins.axis}{ty(ins.out)}"
    if isinstance(ins, EdgeMask):
        return f"{ins.out} = edge_mask {_axes(ins.axes)}{ty(ins.out)}"
    if isinstance(ins, Load):
        oth = f" other {_lit(ins.other)}" if ins.mask else ""
        return (f"{ins.out} = load {ins.buffer}[{_affine(ins.strides, ins.offset, ins.index)}]"
                f"{m(ins.mask)}{oth}{ty(ins.out)}")
    if isinstance(ins, Store):
        return (f"store {ins.buffer}[{_affine(ins.strides, ins.offset, ins.index)}] <- "
                f"{ins.value}{m(ins.mask)}")
    if isinstance(ins, Broadcast):
        return f"{ins.out} = broadcast {ins.x} over {_axes(ins.axes)}{ty(ins.out)}"
    if isinstance(ins, Widen):
        return f"{ins.out} = widen {ins.x} -> {ins.to}{ty(ins.out)}"
    if isinstance(ins, Round):
        return f"{ins.out} = round {ins.x} -> {ins.to} ({ins.overflow}){ty(ins.out)}"
    if isinstance(ins, Cast):
        modes = "" if (ins.overflow, ins.rounding) == ("nonfinite", "nearest") else \
            f" ({ins.overflow}, {ins.rounding})"
        return f"{ins.out} = cast {ins.x} -> {ins.to}{modes}{ty(ins.out)}"
    if isinstance(ins, BinOp):
        return f"{ins.out} = {ins.kind} {ins.a}, {ins.b}{ty(ins.out)}"
    if isinstance(ins, UnOp):
        return f"{ins.out} = {ins.kind} {ins.x}{ty(ins.out)}"
    if isinstance(ins, Select):
        return f"{ins.out} = select {ins.cond}, {ins.a}, {ins.b}{ty(ins.out)}"
    if isinstance(ins, Bitcast):
        return f"{ins.out} = bitcast {ins.x} -> {ins.to}{ty(ins.out)}"
    if isinstance(ins, Math):
        contract = ""
        if types is not None and ins.x in types and types[ins.x].dtype != "f64":
            from tilefoundry.semantics.ulp import budget

            key = ins.fn
            try:
                contract = f" [ulp <= {budget(key, types[ins.x].dtype):g}]"
            except Exception:  # a dtype the table does not cover
                contract = ""
        elif types is not None:
            contract = " [f64 libm]"
        if ins.within:
            contract += f" [for {ins.within}]"
        return f"{ins.out} = math.{ins.fn} {ins.x}{contract}{ty(ins.out)}"
    if isinstance(ins, Reduce):
        init = f" init {ins.init}" if ins.init else ""
        return (f"{ins.out} = reduce.{ins.kind} {ins.x} over {_axes(ins.axes)} "
                f"[{ins.policy}]{m(ins.mask)}{init}{ty(ins.out)}")
    if isinstance(ins, Dot):
        init = f" init {ins.init}" if ins.init else ""
        order = "reassociate" if ins.reassociate else "k_order"
        return (f"{ins.out} = dot {ins.a}, {ins.b} over d{ins.axis} [{order}]{m(ins.mask)}"
                f"{init}{ty(ins.out)}")
    if isinstance(ins, TileLoop):
        carry = ", ".join(f"{c} = {i}" for c, i in zip(ins.carried, ins.inits, strict=True))
        rev = " reversed" if ins.reverse else ""
        return f"{', '.join(ins.outs)} = tile_loop d{ins.axis}{rev} carry ({carry})"
    return repr(ins)


def _kernel_lines(k: Kernel, bm: Mapping[str, Buffer], indent: str) -> list[str]:
    try:
        types: Mapping[str, Tile] | None = _Checker(k, bm, "print", strict=False).run()
    except KernelIRError:
        types = None
    loops = f" loop_axes [{_axes(k.loop_axes)}]" if k.loop_axes else ""
    lines = [f"{indent}kernel {k.name} domain {list(k.domain)} block {list(k.block)} "
             f"grid {list(k.grid)}{loops}"]

    def body(seq: Iterable[Instr], ind: str) -> None:
        for ins in seq:
            lines.append(ind + _instr_text(ins, types, k.block))
            if isinstance(ins, TileLoop):
                body(ins.body, ind + "  ")
                lines.append(f"{ind}  yield {', '.join(ins.yields)}")

    body(k.body, indent + "  ")
    return lines


def _buffer_line(b: Buffer) -> str:
    head = f"{b.kind:<5} {b.name}: {b.dtype}{list(b.shape)} strides {list(b.strides)}"
    if b.kind == "alias":
        head += f" view of {b.base}" + (f" + {b.offset}" if b.offset else "")
    if b.kind == "const" and isinstance(b.data, np.ndarray):
        if b.data.size <= 4:
            vals = ", ".join(repr(float(v)) if is_float(b.dtype) else str(v)
                             for v in b.data.reshape(-1).astype(
                                 np.float64 if is_float(b.dtype) else b.data.dtype).tolist())
            head += f" = [{vals}]"
        else:
            head += f" = <{b.data.size} values>"
    return head


def _outputs_text(o: Any) -> str:
    if isinstance(o, tuple):
        return "(" + ", ".join(_outputs_text(x) for x in o) + ("," if len(o) == 1 else "") + ")"
    return o


def to_text(program: Program | Kernel, buffers: Iterable[Buffer] | None = None) -> str:
    """The program (or one kernel) as text: buffers, then steps; every SSA value with its tile
    type at the current block sizes."""
    if isinstance(program, Kernel):
        bm = {b.name: b for b in (buffers or ())}
        return "\n".join(_kernel_lines(program, bm, ""))
    bm = program.buffer_map()
    lines = [f"program {program.name}({', '.join(program.inputs)}) -> "
             f"{_outputs_text(program.outputs)}"]
    lines += ["  " + _buffer_line(b) for b in program.buffers]

    def steps(seq: Iterable, ind: str) -> None:
        for s in seq:
            if isinstance(s, Kernel):
                lines.extend(_kernel_lines(s, bm, ind))
            else:
                carry = ", ".join(f"{c} = {i}" for c, i in zip(s.carried, s.inits, strict=True))
                lines.append(f"{ind}loop {s.name} {s.var} in range({s.start}, {s.stop}, "
                             f"{s.step}) carry ({carry})")
                steps(s.body, ind + "  ")
                lines.append(f"{ind}  yield {', '.join(s.yields)}")

    steps(program.steps, "  ")
    return "\n".join(lines) + "\n"


def instr_fields(ins: Instr) -> dict[str, Any]:
    return {f.name: getattr(ins, f.name) for f in fields(ins)}
