"""The Triton renderer's reductions (``render_triton._KernelT`` inherits ``ReduceT``): fold
policies one lane a step, ``unordered_tree`` sums and max / min as ``tl.reduce`` / integer
keys, the compensated (TwoSum) fold. Split from ``render_triton`` by concern (issue 36); the
identity, the in-order rule and the valid-lane rule are ``render_decisions``' (D500).
"""

from __future__ import annotations

from tilefoundry.compiler import kir
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.spelling import LOGIC as _LOGIC
from tilefoundry.compiler.spelling import TRITON_TL as _TL
from tilefoundry.compiler.spelling import triton_name as _name

__all__ = ["ReduceT"]


class ReduceT:
    """The reductions of ``_KernelT`` (a mixin: it reads the kernel's ``k``, ``types``,
    ``block``, ``rank``, ``dt``, ``shape``, ``emit``, ``put``, ``fresh``, ``full_const``)."""

    # -- reductions ---------------------------------------------------------------------------
    def identity(self, kind: str, dt: str, shape: list[int]) -> str:
        return self.full_const(rd.reduce_identity(kind, dt), dt, shape)

    def i_Reduce(self, ins: kir.Reduce, ind: str) -> None:
        dt, kind, policy = self.dt(ins.x), ins.kind, ins.policy
        if dt in rd.WIDEN_SOURCES or (kind == "abs_max" and dt == "bool") or \
                (kind == "prod" and not kir.is_int(dt)):
            raise self.unsupported("Reduce", f"{ins.out}: {kind} over {dt}")
        # integer abs_max compares magnitudes unsigned (a wrapped |INT_MIN| stays the largest)
        umag = kind == "abs_max" and kir.is_int(dt)
        ut = {"i8": "tl.uint8", "u8": "tl.uint8", "i32": "tl.uint32", "i64": "tl.uint64"}.get(dt)
        full = set(self.types[ins.x].full) | (set(self.types[ins.mask].full) if ins.mask
                                              else set())
        red = [d for d in ins.axes if d in full]
        ordered = rd.reduce_in_order(kind, dt, policy)
        xshape = self.shape(full=full)
        oshape = self.shape(ins.out)
        x = self.fresh("x")
        self.emit(ind, f"{x} = tl.broadcast_to({_name(ins.x)}, {xshape})")
        if umag:
            mag = x if dt == "u8" else f"tl.where({x} < 0, (0 - {x}).to({_TL[dt]}), {x})"
            self.emit(ind, f"{x} = {mag}.to({ut}, bitcast=True)")
        elif kind == "abs_max":
            self.emit(ind, f"{x} = {'_tf_abs32' if dt == 'f32' else '_tf_abs64'}({x})")
        if dt == "bool":
            self.emit(ind, f"{x} = {x}.to(tl.int32)")
        rdt = "i32" if dt == "bool" else dt
        if ins.mask:  # masked lanes: the step's exact identity (+0 for the TwoSum fold)
            mk = f"tl.broadcast_to({_name(ins.mask)}, {xshape})"
            ident = self.full_const(0.0, "f64", [1] * self.rank) if kind in kir.COMPENSATED \
                else f"tl.full({[1] * self.rank}, {rd.reduce_identity(kind, dt)}, {ut})" if umag \
                else f"tl.full({[1] * self.rank}, {int(rd.reduce_identity(kind, dt))}, tl.int32)" \
                if dt == "bool" else self.identity(kind, rdt, [1] * self.rank)
            # (a bool is reduced as 0 / 1 in i32: its identities are False / True, not the
            # i32 extremes, which a fiber with no active lane turned into True)
            self.emit(ind, f"{x} = tl.where({mk}, {x}, {ident})")
        acc = self.fresh("r")
        init = _name(ins.init) if ins.init else None
        if kind in kir.COMPENSATED:
            hi, lo = self.fresh("hi"), self.fresh("lo")
            self.emit(ind, f"{hi} = {self.full_const(0.0, 'f64', oshape)}")
            self.emit(ind, f"{lo} = {self.full_const(0.0, 'f64', oshape)}")
            inner, at = self.lane_loops(ind, red, False)
            w = self.fresh("w")
            self.emit(inner, f"{w} = {self.lanes(x, at, dt) if at else x}")
            self.emit(inner, f"{hi}, {w} = _tf_two_sum({hi}, {w})")
            self.emit(inner, f"{lo} = {lo} + {w}")
            self.emit(ind, f"{hi}, {lo} = _tf_two_sum({hi}, {lo})")
            self.emit(ind, f"{acc} = {hi if kind == 'sum_hi' else lo}")
        elif ordered:
            seeded = init is not None and policy in ("fold_left", "fold_right")
            # fold_left: the seed first; fold_right: the seed last (the first the fold meets)
            self.emit(ind, f"{acc} = tl.broadcast_to({init}, {oshape})" if seeded else
                      f"{acc} = {self.identity('sum', dt, oshape)}")
            right = policy == "fold_right"
            inner, at = self.lane_loops(ind, red, right)
            lane = self.fresh("ln")
            self.emit(inner, f"{lane} = {self.lanes(x, at, dt) if at else x}")
            self.emit(inner, f"{acc} = {lane} + {acc}" if right else f"{acc} = {acc} + {lane}")
            if init is not None and not seeded:  # ordered_tree: init + tree
                self.emit(ind, f"{acc} = {init} + {acc}")
        else:
            cur = x
            # an f32 max / min / abs_max reduces integer keys (``_tf_key32``: NaN first, -0 <
            # +0, so the pick is exact, D341): a native integer max, not a float select chain
            key = dt == "f32" and kind in ("max", "min", "abs_max")
            if key:
                nonneg = kind == "abs_max" or self.is_abs(ins.x)
                k = self.fresh("k")
                self.emit(ind, f"{k} = {cur}.to(tl.int32, bitcast=True)" if nonneg and
                          kind != "min" else f"{k} = _tf_key32({cur}, {int(kind == 'min')})")
                cur = k
            for d in red:
                nxt = self.fresh("r")
                if key:
                    fn = "tl.min" if kind == "min" else "tl.max"
                    self.emit(ind, f"{nxt} = {fn}({cur}, axis={d}, keep_dims=True)")
                elif kind == "sum" and kir.is_float(dt):
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, _tf_add, keep_dims=True)")
                elif kind == "sum":
                    self.emit(ind, f"{nxt} = tl.sum({cur}, axis={d}, keep_dims=True)")
                elif kind == "prod":  # integers only: products wrap, so any order is exact
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, _tf_mul, keep_dims=True)")
                elif kir.is_float(dt):
                    pick = "_tf_pickmin" if kind == "min" else "_tf_pickmax"
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, {pick}, keep_dims=True)")
                else:
                    fn = "tl.min" if kind == "min" else "tl.max"
                    self.emit(ind, f"{nxt} = {fn}({cur}, axis={d}, keep_dims=True)")
                cur = nxt
            if key:
                cur = f"_tf_unkey32({cur})"
            self.emit(ind, f"{acc} = tl.broadcast_to({cur}, {oshape})")
            if dt == "bool":
                self.emit(ind, f"{acc} = {acc} != 0")
            elif umag:
                self.emit(ind, f"{acc} = {acc}.to({ut}).to({_TL[dt]}, bitcast=True)")
            elif kir.is_int(dt):
                self.emit(ind, f"{acc} = {acc}.to({_TL[dt]})")
            if init is not None:
                if umag:
                    comb = (f"tl.where({init}.to({ut}, bitcast=True) >= "
                            f"{acc}.to({ut}, bitcast=True), {init}, {acc})")
                elif kind == "sum":
                    comb = f"({init} + {acc})" if kir.is_float(dt) else \
                        f"({init} + {acc}).to({_TL[dt]})"
                elif kind == "prod":
                    comb = f"({init} * {acc}).to({_TL[dt]})"
                elif dt == "bool":
                    comb = f"({init} {_LOGIC[rd.BOOL_MINMAX[kind]]} {acc})"
                elif kir.is_float(dt):
                    comb = f"_tf_f{'min' if kind == 'min' else 'max'}({init}, {acc})"
                else:
                    comb = f"tl.{'minimum' if kind == 'min' else 'maximum'}({init}, {acc})"
                self.emit(ind, f"{acc} = {comb}")
        if rd.tracks_valid_lane(kind, dt, bool(ins.mask), init is not None) \
                and not kir.a_lane_is_valid(self.k.body, ins.mask, red, self.k.domain):
            # a row with no valid lane is +0 (the interpreter's identity)
            anyv = self.fresh("any")
            cur = f"tl.broadcast_to({_name(ins.mask)}, {xshape}).to(tl.int32)"
            for d in red:
                cur = f"tl.max({cur}, axis={d}, keep_dims=True)"
            self.emit(ind, f"{anyv} = {cur}")
            self.emit(ind, f"{acc} = tl.where({anyv} != 0, {acc}, 0.0)")
        self.put(ind, ins.out, acc)

    def is_abs(self, ssa: str) -> bool:
        """``ssa`` is an ``abs`` of this kernel (its sign bit is clear)."""
        return any(isinstance(i, kir.UnOp) and i.out == ssa and i.kind == "abs"
                   for i in kir.iter_instrs(self.k.body))

    def lane(self, v: str, d: int, j: str, dt: str, full: frozenset) -> str:
        """Lane ``j`` of ``v`` along axis ``d`` (kept as extent 1; ``v`` itself if not full)."""
        if d not in full:
            return v
        return self.lanes(v, [(d, j)], dt)

    def lanes(self, v: str, at: list[tuple[int, str]], dt: str) -> str:
        """The one lane of ``v`` at coordinates ``at`` (axis, index expression) of the tile,
        exactly: an integer sum of the lane's bit pattern and zeros (a float ``tl.sum`` would
        turn a -0 lane into +0 in the interpreter)."""
        sel = " & ".join(f"(tl.reshape(tl.arange(0, {self.block[d]}), "
                         f"{[self.block[d] if e == d else 1 for e in range(self.rank)]}) == {j})"
                         for d, j in at)
        bits = {"f32": ("tl.int32", "tl.float32"), "f64": ("tl.int64", "tl.float64")}.get(dt)
        x = f"{v}.to({bits[0]}, bitcast=True)" if bits else \
            (f"{v}.to(tl.int32)" if dt == "bool" else v)
        r = f"tl.where({sel}, {x}, 0)"
        for d, _ in at:
            r = f"tl.sum({r}, axis={d}, keep_dims=True)"
        if bits:
            return f"{r}.to({bits[0]}).to({bits[1]}, bitcast=True)"
        if dt == "bool":
            return f"({r} != 0)"
        return f"{r}.to({_TL[dt]})"

    def lane_loops(self, ind: str, red: list[int], reverse: bool) -> tuple[str, list]:
        """Nested loops over the lanes of ``red`` in lexicographic (or reverse) order; returns
        the innermost indentation and the (axis, index) coordinates."""
        at = []
        for d in red:
            i = self.fresh("i")
            b = self.block[d]
            self.emit(ind, f"for {i} in range(0, {b}):")
            ind += "    "
            at.append((d, f"({b - 1} - {i})" if reverse else i))
        return ind, at
