"""Planted-bug backends of the flagged scans (issue 37): the reference with one planted
behaviour (``planted_backends.Planted``).

* ``segmented_seed_per_chunk`` — the per-chunk seed of a SegmentedScan leaks across segment
  heads: every segment starts from the seed (as if each segment were its own chunk with the
  incoming state), not only the segment before the first head.
* ``masked_padding_combined`` — a MaskedScan that combines every lane, masked or not (the
  padding treated as valid contributions).
"""

from __future__ import annotations

import numpy as np

from tests.conformance.planted_backends import Planted, _wrap_eval
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.scan_flags import flagged_scan


def segmented_seed_per_chunk() -> Planted:
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            x, heads = np.asarray(args[0]), np.asarray(args[1], bool)
            if op.seed is None or x.ndim == 0 or x.size == 0:
                return good(ctx, args)
            ax = op.axis % x.ndim
            seg = np.cumsum(heads, axis=ax)
            out = np.array(good(ctx, args), copy=True)
            for s in range(1, int(seg.max(initial=0)) + 1):  # every later segment, seeded
                r = flagged_scan(x, seg == s, "mask", op.combine, ax, inclusive=op.inclusive,
                                 seed=op.seed)
                out = np.where(seg == s, r, out)
            return out
        return bad
    return Planted("segmented-seed-per-chunk", lambda: _wrap_eval(SegmentedScan, make))


def masked_padding_combined() -> Planted:
    def make(good):
        def bad(ctx, args):
            return good(ctx, (args[0], np.ones(np.shape(args[1]), bool)))
        return bad
    return Planted("masked-padding-combined", lambda: _wrap_eval(MaskedScan, make))


BUGS = {"segmented_seed_per_chunk": ("SegmentedScan",),
        "masked_padding_combined": ("MaskedScan",)}


def flagged_ordered_tree_pairwise() -> Planted:
    """A legal freedom: an ordered-tree float add of a flagged scan whose prefix i is the
    balanced pairwise tree over its own leaves (the seed first where it enters, the kept
    contributions in order; a skipped lane an exact -0 leaf, IEEE's additive identity)."""
    from tilefoundry.semantics.dtypes import cast, dtype_of, widen_to_f32
    from tilefoundry.semantics.evaluator.tile_scan_flags import flag_mode
    from tilefoundry.semantics.reductions import pairwise as _pairwise
    from tilefoundry.semantics.scan_flags import keep_matrix

    def make(good):
        def bad(ctx, args):
            op = ctx.op
            x, flags = np.asarray(args[0]), np.asarray(args[1], bool)
            dt = dtype_of(x)
            if not (op.policy == "ordered_tree" and op.combine == "add" and dt.is_float) or \
                    x.size == 0:
                return good(ctx, args)
            ax = op.axis % x.ndim
            ref = good(ctx, args)
            w = np.moveaxis(widen_to_f32(x).astype(np.float32), ax, -1)
            keep, seeded = keep_matrix(flags, flag_mode(op), ax, inclusive=op.inclusive)
            leaves = np.where(keep, w[..., None, :], np.float32(-0.0))
            if op.seed is not None:
                sd = np.where(seeded, np.float32(op.seed), np.float32(-0.0))[..., None]
                leaves = np.concatenate([sd, leaves], -1)
            with np.errstate(all="ignore"):
                s = _pairwise(leaves, np.add).astype(np.float32)
            empty = ~keep.any(-1) & ~(seeded if op.seed is not None else False)
            out = np.moveaxis(np.asarray(cast(s, dt)), -1, ax)
            return np.where(np.moveaxis(empty, -1, ax), ref, out).astype(ref.dtype)
        return bad

    def patch():
        import contextlib

        @contextlib.contextmanager
        def both():
            with _wrap_eval(MaskedScan, make), _wrap_eval(SegmentedScan, make):
                yield
        return both()
    return Planted("flagged-ordered-tree-pairwise", patch)


LEGAL = {"flagged_ordered_tree_pairwise": ("MaskedScan", "SegmentedScan")}
