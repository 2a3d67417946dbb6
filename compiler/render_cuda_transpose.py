"""The CUDA backend's transpose mapping (D551): a copy kernel whose load walks one axis with a
unit stride and whose store another, moved through shared memory in 32 x 32 tiles.

Under the lane and block mappings consecutive threads walk the last axis of the kernel's tile,
so a transposing copy reads (or writes) one element per thread ``N`` elements apart: every warp
touches 32 sectors for 32 elements (the fp8 K-major copy of an 8192² B took about 0.45 ms, a
tenth of the bandwidth). Here each block owns a 32 x 32 tile of the two axes (and one
coordinate of every other axis): in the first phase its 256 threads (32 x 8, four rows each)
read the tile with consecutive threads along the load's unit-stride axis into
``tile[store-axis][load-axis]`` (a padded row of 33, so the second phase's column reads fall in
different banks), a barrier, then write it with consecutive threads along the store's
unit-stride axis. Each element is read and written once, at the offsets the kernel IR's load and
store give its coordinates; coordinates past the domain are neither read nor written (the
copy's edge masks), and an offset outside its buffer is never touched (as the other mappings'
clamps). Values are moved, never converted: the load's and the store's buffers have the value's
dtype.

Declined (the other mappings then apply), with the reason in ``--explain``: not a plain copy
(``forward.copy_of``), a snapshot, a store that two lanes share, the two unit-stride axes the
same axis or missing, or more tiles than a launch takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilefoundry.compiler import kir
from tilefoundry.compiler.forward import copy_of
from tilefoundry.compiler.render_c import CTYPE

TILE = 32
ROWS = 8  # thread rows of a block: each thread moves TILE / ROWS elements a phase
THREADS = TILE * ROWS
MAX_BLOCKS = (1 << 31) - 1


@dataclass(frozen=True)
class TransposePlan:
    la: int  # the axis the load walks with a unit stride
    sa: int  # the axis the store walks with a unit stride
    load: kir.Load
    store: kir.Store
    blocks: int

    def plan_entry(self) -> dict:
        return {"threads": THREADS, "blocks": self.blocks}


def plan_transpose(kc) -> tuple[TransposePlan | None, str]:
    """The plan for ``kc``'s kernel, or (None, why not)."""
    k = kc.k
    got = copy_of(k)
    if got is None:
        return None, "not a plain copy (one load, one store of it)"
    ld, st = got
    if kc.snap:
        return None, "it reads storage it writes"
    if not kc.parallel_safe():
        return None, "two lanes store to one element"
    unit = lambda ins: [d for d, s in enumerate(ins.strides)  # noqa: E731
                        if s == 1 and k.domain[d] > 1]
    la, sa = unit(ld), unit(st)
    if len(la) != 1 or len(sa) != 1 or la == sa:
        return None, "its load and store do not walk two different axes with a unit stride"
    la, sa = la[0], sa[0]
    blocks = -(-k.domain[la] // TILE) * -(-k.domain[sa] // TILE) * \
        math.prod(n for d, n in enumerate(k.domain) if d not in (la, sa))
    if blocks > MAX_BLOCKS:
        return None, "too many tiles for one launch"
    return TransposePlan(la, sa, ld, st, blocks), ""


def _offset(kc, ins: kir.Load | kir.Store, coord: dict[int, str]) -> tuple[str, str, int]:
    """(C pointer, element offset expression, root size) of ``ins`` at ``coord``."""
    p, size, base, _ = kc.ptr(ins.buffer, write=isinstance(ins, kir.Store))
    terms = [f"{base + ins.offset}ll"] + [f"{coord[d]} * {s}ll" for d, s in
                                          enumerate(ins.strides) if s]
    return p, " + ".join(terms), size


def render_whole(kc) -> str | None:
    """The kernel under the transpose mapping where it applies (sets ``kc.transpose``,
    ``kc.block`` and ``kc.why``), else None (``kc.why_not_transpose`` says why)."""
    t, no = plan_transpose(kc)
    kc.why_not_transpose = no
    if t is None:
        return None
    k = kc.k
    kc.transpose, kc.block, kc.scratch = t, THREADS, 0
    kc.why = (f"transpose mapping: a copy whose load walks axis {t.la} and store axis {t.sa} "
              f"with unit strides, {TILE}x{TILE} tiles through shared memory, {THREADS} "
              f"threads a block (D551)")
    ct = CTYPE[kc.bm[t.store.buffer].dtype]
    n = len(kc.roots)
    params = [f"char *p{i}" for i in range(n)] + ["char *S0", "int64_t lo", "int64_t hi"]
    ps = ", ".join(f"p{i}" for i in range(n)) or "0"
    nla, nsa = -(-k.domain[t.la] // TILE), -(-k.domain[t.sa] // TILE)
    out = [kc.comment(), f"/* {kc.why} */",
           f'extern "C" __global__ void __launch_bounds__({THREADS}) tf_k{kc.kidx}(',
           "    " + ", ".join(params) + ")", "{",
           "    const int64_t pid = lo + (int64_t)blockIdx.x;",
           "    if (pid >= hi) return;",
           f"    char *const P[{max(n, 1)}] = {{{ps}}};", "    (void)P; (void)S0;",
           f"    TF_SHARED {ct} tf_tile[{TILE}][{TILE + 1}];",
           "    int64_t q = pid;",
           f"    const int64_t tf_a0 = (q % {nla}ll) * {TILE}ll; q /= {nla}ll;",
           f"    const int64_t tf_s0 = (q % {nsa}ll) * {TILE}ll; q /= {nsa}ll;"]
    coord = {t.la: "tf_a", t.sa: "tf_s"}
    for d in reversed(range(k.rank)):
        if d in coord:
            continue
        out.append(f"    const int64_t tf_g{d} = q % {k.domain[d]}ll; q /= {k.domain[d]}ll;")
        coord[d] = f"tf_g{d}"
    out.append("    (void)q;")
    inside = f"tf_a < {k.domain[t.la]}ll && tf_s < {k.domain[t.sa]}ll"
    lp, lo_, lsize = _offset(kc, t.load, coord)
    sp, so, ssize = _offset(kc, t.store, coord)
    # phase 1: consecutive threads along the load's axis; phase 2: along the store's
    for first in (True, False):
        x, y = ("tf_a", "tf_s") if first else ("tf_s", "tf_a")
        out += ["    TF_PHASE_BEGIN",
                f"    {{ const int tf_x = (int)(threadIdx.x % {TILE}u), tf_y = (int)"
                f"(threadIdx.x / {TILE}u);",
                f"        for (int tf_j = 0; tf_j < {TILE}; tf_j += {ROWS}) {{",
                f"            const int64_t {x} = tf_{x[3]}0 + tf_x, {y} = tf_{y[3]}0 + tf_y + "
                f"tf_j;",
                f"            if (!({inside})) continue;"]
        if first:
            out += [f"            const int64_t o = {lo_};",
                    f"            if (o >= 0 && o < {lsize}ll) tf_tile[tf_y + tf_j][tf_x] = "
                    f"{lp}[o];"]
        else:
            out += [f"            const int64_t o = {so};",
                    f"            if (o >= 0 && o < {ssize}ll) {sp}[o] = tf_tile[tf_x][tf_y + "
                    f"tf_j];"]
        out += ["        }", "    }", "    TF_PHASE_END"]
        if first:
            out.append("    TF_SYNC")
    out.append("}")
    return "\n".join(out)
