"""Refinement of one kernel-IR program by another, proved with Z3 (Alive2's four outcomes).

``check_refinement(src, tgt)`` runs both programs symbolically on the same input bit patterns
and asks Z3 for inputs on which some output element of ``tgt`` differs from ``src``'s:

* every output compared element by element with SMT equality: bit-equal values, NaN compared
  as a class (D21: the project fixes no NaN payload in arithmetic; one NaN per sort), ``-0`` and
  ``+0`` distinct; integers and 8-bit codes bit for bit;
* ``unsat``: **valid**; ``unknown`` / timeout: **failed to prove** (never a pass);
* ``sat``: the model's inputs are replayed on the ``kernel-interp`` interpreter for both
  programs. Outputs that differ there: **invalid**, with the counterexample (inputs as hex bits
  and values, every output and every intermediate buffer of both sides). Outputs that agree
  (the model leaned on an abstraction: an uninterpreted math function, the abstracted admitted
  set of an ``unordered_tree`` sum): **failed to prove**, naming the abstractions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Program
from tilefoundry.errors import TilefoundryError
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.symexec import input_vars, run_symbolic

__all__ = ["OUTCOMES", "Counterexample", "Outcome", "SymRuns", "check_lowering",
           "check_refinement", "decide", "judge_by_contract", "replay"]

OUTCOMES = ("valid", "invalid", "failed to prove", "unsupported")


@dataclass
class Counterexample:
    """Inputs (per buffer: bit patterns and values), both sides' outputs and intermediates."""

    inputs: dict[str, np.ndarray]
    src: dict[str, np.ndarray]
    tgt: dict[str, np.ndarray]
    src_temps: dict[str, np.ndarray] = field(default_factory=dict)
    tgt_temps: dict[str, np.ndarray] = field(default_factory=dict)
    differing: list[str] = field(default_factory=list)
    #: why outputs that differ in bits are not counted as differing (an op's ULP contract)
    note: str = ""
    #: the entry's inputs as the replay passed them, where ``inputs`` shows them otherwise (a
    #: sharded program's ``Sharded`` values, ``inputs`` their devices' pieces); None: ``inputs``
    entry_inputs: list | None = None

    @property
    def elements(self) -> int:
        return int(sum(a.size for a in self.inputs.values()))

    def text(self) -> str:
        lines = ["inputs:"]
        for n, a in self.inputs.items():
            lines.append(f"  {n}: {_fmt(a)}")
        for side, outs, temps in (("source", self.src, self.src_temps),
                                  ("target", self.tgt, self.tgt_temps)):
            lines.append(f"{side}:")
            for n, a in temps.items():
                lines.append(f"  temp {n}: {_fmt(a)}")
            for n, a in outs.items():
                lines.append(f"  output {n}: {_fmt(a)}")
        lines.append("differing output elements: " + ", ".join(self.differing))
        return "\n".join(lines)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _fmt(a: np.ndarray) -> str:
    a = np.asarray(a)
    bits = _bits(a).reshape(-1)
    w = a.dtype.itemsize * 2
    vals = a.reshape(-1)
    items = [f"0x{int(b):0{w}x}={v!r}" if a.dtype != bool else str(bool(v))
             for b, v in zip(bits, vals.tolist(), strict=True)]
    return f"{a.dtype}{list(a.shape)} [" + ", ".join(items) + "]"


@dataclass
class Outcome:
    status: str
    reason: str = ""
    seconds: float = 0.0
    counterexample: Counterexample | None = None
    abstractions: tuple[str, ...] = ()

    def __post_init__(self):
        assert self.status in OUTCOMES, self.status


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise refinement on concrete outputs: equal bits, or both NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return np.zeros(a.shape, bool)
    eq = _bits(a) == _bits(b)
    if a.dtype.kind == "f" or "float" in str(a.dtype) or "e" in str(a.dtype).lower():
        try:
            with np.errstate(all="ignore"):
                nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
            eq = eq | nan
        except (TypeError, ValueError):
            pass
    return eq


def _temps(p: Program, inputs: list[np.ndarray]) -> tuple[dict, dict]:
    it = Interpreter(p)
    st = it.storage(inputs)
    it.steps(p.steps, st)
    outs = {n: it.read(st, n) for n in p.output_names()}
    temps = {b.name: it.read(st, b.name) for b in p.buffers
             if b.kind == "temp" and b.name not in outs}
    return outs, temps


def replay(src: Program, tgt: Program, inputs: list[np.ndarray]) -> Counterexample:
    """Run both programs on ``kernel-interp`` (the interpreter) and compare their outputs."""
    so, stemps = _temps(src, inputs)
    to, ttemps = _temps(tgt, inputs)
    diff = []
    for (_sn, sa), (tn, ta) in zip(so.items(), to.items(), strict=True):
        bad = ~_same(sa, ta)
        for idx in zip(*np.nonzero(bad.reshape(sa.shape) if sa.ndim else bad.reshape(1)),
                       strict=True):
            diff.append(f"{tn}[{','.join(map(str, idx))}]")
    return Counterexample(dict(zip(src.inputs, inputs, strict=True)), so, to, stemps, ttemps,
                          diff)


def _model_inputs(model: z3.ModelRef, src: Program, bits: dict[str, np.ndarray]) -> list:
    bm = src.buffer_map()
    out = []
    for n in src.inputs:
        b = bm[n]
        npdt = kir.numpy_dtype(b.dtype)
        raw = np.array([model.eval(v, model_completion=True).as_long()
                        for v in bits[n].reshape(-1)], dtype=np.uint64)
        u = raw.astype(np.dtype(f"u{npdt.itemsize}"))
        out.append(u.view(npdt).reshape(b.shape))
    return out


class SymRuns:
    """A memo of symbolic runs (``run_symbolic``) for the passes of one ``validate_program``:
    the same kernel-IR program on the same input variables is the target of one check and the
    source of the next (``lower``'s program is run by ``canonicalize``, ``lower`` and
    ``fuse``; ``fuse``'s by ``fuse`` and ``schedule``). A run is a pure function of the program
    and the variables (terms are hash-consed; the tree choices are registered by content), so a
    memoized run is the run. Keyed by the program object (held, so its id stays its own) and
    the variables' term ids."""

    def __init__(self) -> None:
        self._runs: dict[tuple, tuple[Program, Any]] = {}

    def run(self, p: Program, bits: dict[str, np.ndarray]):
        key = (id(p), tuple(v.get_id() for n in p.inputs for v in bits[n].reshape(-1)))
        hit = self._runs.get(key)
        if hit is not None and hit[0] is p:
            return hit[1]
        r = run_symbolic(p, bits)
        self._runs[key] = (p, r)
        return r


def _run(runs: SymRuns | None, p: Program, bits: dict[str, np.ndarray]):
    return runs.run(p, bits) if runs is not None else run_symbolic(p, bits)


def check_refinement(src: Program, tgt: Program, *, timeout_ms: int = 10_000,
                     runs: SymRuns | None = None, narrow: bool = True) -> Outcome:
    """Does ``tgt`` refine ``src`` on all inputs (the programs' concrete shapes)? ``runs``
    memoizes the symbolic runs across the checks of one pipeline; ``narrow``: try the
    narrowed query first (``decide``; off, a counterexample reads worse, D530)."""
    t0 = time.perf_counter()
    sbm, tbm = src.buffer_map(), tgt.buffer_map()
    sig = lambda p, bm: [(bm[n].dtype, bm[n].shape) for n in p.inputs]  # noqa: E731
    if sig(src, sbm) != sig(tgt, tbm):
        return Outcome("unsupported", f"the programs take different inputs: {sig(src, sbm)} vs "
                       f"{sig(tgt, tbm)}", time.perf_counter() - t0)
    if len(src.output_names()) != len(tgt.output_names()):
        return Outcome("unsupported", "the programs have different numbers of outputs",
                       time.perf_counter() - t0)
    bits = input_vars(src)
    try:
        s = _run(runs, src, bits)
        t = _run(runs, tgt, dict(zip(tgt.inputs, (bits[n] for n in src.inputs), strict=True)))
    except Unsupported as e:
        return Outcome("unsupported", str(e), time.perf_counter() - t0)
    pairs = []
    for sn, tn in zip(src.output_names(), tgt.output_names(), strict=True):
        a, b = s.outputs[sn], t.outputs[tn]
        if a.shape != b.shape or s.dtypes[sn] != t.dtypes[tn]:
            return Outcome("unsupported",
                           f"output {tn}: {t.dtypes[tn]}{list(b.shape)} vs source "
                           f"{s.dtypes[sn]}{list(a.shape)}", time.perf_counter() - t0)
        pairs.append((a, b))
    return decide(pairs, s.abstractions, t.abstractions,
                  lambda m: replay(src, tgt, _model_inputs(m, src, bits)), t0, timeout_ms,
                  _hints(src, bits) if narrow else None)


def _hints(p: Program, bits: dict[str, np.ndarray]) -> list:
    """Float inputs zero or with an exponent within 2^±6 (``decide``'s narrowed first try)."""
    bm = p.buffer_map()
    out = []
    for n in p.inputs:
        dt = bm[n].dtype
        if not E.is_fp(dt):
            continue
        e, m = E.FP_SORTS[dt]
        w = e + m
        bias = (1 << (e - 1)) - 1
        for v in bits[n].reshape(-1):
            ex = z3.Extract(w - 2, m - 1, v)
            mag = z3.Extract(w - 2, 0, v)
            out.append(z3.Or(mag == 0, z3.And(z3.UGE(ex, bias - 6), z3.ULE(ex, bias + 6))))
    return out


#: the abstraction named when a target holds unspecified elements (D526)
TARGET_UNSPECIFIED = ("unspecified elements of the target (a float -> int cast out of range, "
                      "a Gather index out of range) taken as 0, what kernel-interp writes for "
                      "the cast")


def decide(pairs: list[tuple[np.ndarray, np.ndarray]], src_abs: set[str], tgt_abs: set[str],
           replay_model, t0: float, timeout_ms: int, hints: list | None = None) -> Outcome:
    """The verdict on (source, target) output term arrays: one query per differing element,
    the first model replayed concretely (``replay_model(model) -> Counterexample``).

    ``hints`` (constraints on the inputs: moderate exponents) first narrow the queries for a
    short while, up to the first element proved equal (D524): a model found there is a
    counterexample like any other (and reads better); an unsat or unknown there proves nothing,
    so the query then runs unnarrowed."""
    from itertools import product

    from tilefoundry.validate.choices import PREFIX, REGISTRY, UNSPEC_PREFIX, UNSPECIFIED, zero

    s_un = {a[len(UNSPEC_PREFIX):] for a in src_abs if a.startswith(UNSPEC_PREFIX)}
    t_un = {a[len(UNSPEC_PREFIX):] for a in tgt_abs if a.startswith(UNSPEC_PREFIX)}
    abstractions = tuple(sorted(a for a in src_abs | tgt_abs
                                if not a.startswith((PREFIX, UNSPEC_PREFIX))))
    s_ch = {a[len(PREFIX):] for a in src_abs if a.startswith(PREFIX)}
    t_ch = {a[len(PREFIX):] for a in tgt_abs if a.startswith(PREFIX)}
    # a choice only the target makes: the member kernel-interp runs (so a model replays); an
    # unspecified element the target holds: 0, what kernel-interp writes (D526)
    tsub = [(REGISTRY[n].var, REGISTRY[n].default) for n in sorted(t_ch - s_ch)] + \
        [(UNSPECIFIED[n], zero(UNSPECIFIED[n])) for n in sorted(t_un)]
    # an unspecified element the source holds: universal (the target must differ from every
    # value the source may take there)
    s_vars = {str(UNSPECIFIED[n]): UNSPECIFIED[n] for n in s_un}
    # a choice only the source makes: universal, every member tried (per output element, the
    # choices its term holds)
    only = {str(REGISTRY[n].var): REGISTRY[n] for n in s_ch - t_ch}
    side = [REGISTRY[n].constraint() for n in sorted(s_ch & t_ch)]
    s_names = frozenset(only) | frozenset(s_vars)
    t_names = frozenset(str(UNSPECIFIED[n]) for n in t_un)
    s_memo: dict[int, frozenset[str]] = {}
    t_memo: dict[int, frozenset[str]] = {}
    diffs = []
    for a, b in pairs:
        for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True):
            if z3.eq(x, y):
                continue
            # equal once simplified: no query (D550). The query keeps the terms as built (a
            # simplified term can be much harder: program/cover/336 went from 0.02 s to a
            # timeout)
            if z3.eq(z3.simplify(x), z3.simplify(y)):
                continue
            if tsub:
                y0, y = y, z3.substitute(y, *tsub)
                if t_un and TARGET_UNSPECIFIED not in abstractions and \
                        _consts(y0, t_names, t_memo):
                    abstractions += (TARGET_UNSPECIFIED,)
            names = _consts(x, s_names, s_memo) if s_names else frozenset()
            held = [only[n] for n in sorted(names & only.keys())]
            univ = [s_vars[n] for n in sorted(names & s_vars.keys())]
            if not held:
                diffs.append(_differs_from_all(x, y, {str(u): u for u in univ}, s_names,
                                               s_memo) if univ else x != y)
                continue
            combos = list(product(*(c.members for c in held)))
            if len(combos) > 256:
                return Outcome("failed to prove", f"an output element depends on "
                               f"{len(combos)} combinations of admitted tree members (more "
                               f"than 256)", time.perf_counter() - t0,
                               abstractions=abstractions)
            svars = [c.var for c in held]
            d = z3.And([z3.substitute(x, *zip(svars, c, strict=True)) != y for c in combos])
            diffs.append(z3.ForAll(univ, d) if univ else d)
    # one query per distinct difference: z3 shares equal terms, so an element whose (source,
    # target) pair repeats another's (a constant's repeated value, one value in two outputs)
    # is proved by that one's query
    diffs = list({d.get_id(): d for d in diffs}.values())
    if not diffs:  # every output term is the same term: valid without a query
        return Outcome("valid", "identical terms", time.perf_counter() - t0,
                       abstractions=abstractions)
    # one query per differing output element: small queries, the first model wins
    unknown = ""
    model = None
    narrow = bool(hints)
    for d in diffs:
        if narrow:
            # half the element's limit, at most 3 s (D530: an element that is "failed to
            # prove" pays both tries)
            r, m, _ = solve([d, *side, *hints], max(1, min(int(timeout_ms) // 2, 3_000)))
            if r == z3.sat:
                model = m
                break
        r, m, why = solve([d, *side], int(timeout_ms))
        if r == z3.sat:
            model = m
            break
        if r == z3.unknown:  # no "valid" is possible any more: stop (a later sat is not sought)
            unknown = f"solver: {why} (timeout {timeout_ms} ms per element)"
            break
        # an element proved equal: the narrowed try is not repeated for the later elements
        # (a valid program paid it on every element, half its solver time; D524)
        narrow = False
    if model is None:
        if unknown:
            return Outcome("failed to prove", unknown, time.perf_counter() - t0,
                           abstractions=abstractions)
        return Outcome("valid", "unsat", time.perf_counter() - t0, abstractions=abstractions)
    try:
        cx = replay_model(model)
    except TilefoundryError as e:  # the source raises on the model (an index out of range)
        return Outcome("failed to prove", f"the counterexample's replay raised "
                       f"{type(e).__name__}: {e}; abstractions used: "
                       f"{', '.join(abstractions) or 'none'}", time.perf_counter() - t0,
                       abstractions=abstractions)
    if cx.differing and not any("admitted set abstracted" in a for a in abstractions):
        return Outcome("invalid", f"{len(cx.differing)} output element(s) differ",
                       time.perf_counter() - t0, cx, abstractions)
    if not cx.differing:
        why = "the solver's counterexample does not reproduce on kernel-interp" + \
            (f" ({cx.note})" if cx.note else "")
    else:
        why = "the outputs differ on the counterexample but an admitted set is abstracted (a " \
            "tree sum over too many lanes to enumerate, or one that depends on mask / flag " \
            "values), so a difference is no proof of a bug"
    return Outcome("failed to prove", why + "; abstractions used: " +
                   (", ".join(abstractions) or "none"), time.perf_counter() - t0, cx,
                   abstractions)


def _differs_from_all(x: z3.ExprRef, y: z3.ExprRef, univ: dict[str, z3.ExprRef],
                      names: frozenset[str], memo: dict[int, frozenset[str]]) -> z3.BoolRef:
    """``ForAll(u, x != y)`` for the universal variables named ``univ`` (a source's
    unspecified elements), the quantifier taken out where ``x`` branches on conditions free of
    them: ``If(c, a, b)`` differs from ``y`` for every ``u`` iff ``c`` and ``a`` does, or not
    ``c`` and ``b`` does; a bare ``u`` can equal anything, so it never differs. Elsewhere
    (``u`` inside arithmetic) the quantifier stays. ``univ``: the variables by name."""
    held = _consts(x, names, memo) & univ.keys()  # (``memo`` is of ``names`` ⊇ ``univ``)
    if not held:
        return x != y
    if z3.is_const(x):  # x is one of the universal variables
        return z3.BoolVal(False)
    if z3.is_app_of(x, z3.Z3_OP_ITE):
        c, a, b = x.children()
        if not _consts(c, names, memo) & univ.keys():
            return z3.Or(z3.And(c, _differs_from_all(a, y, univ, names, memo)),
                         z3.And(z3.Not(c), _differs_from_all(b, y, univ, names, memo)))
    return z3.ForAll([univ[n] for n in sorted(held)], x != y)


#: the memory ceiling of one solver query, in MB (D530)
MAX_MEMORY_MB = 1024


#: the logics' solvers a query tries before Z3's default one (D538), by what the query holds,
#: each for this share of the element's time limit; the default solver then gets the whole
#: limit (an element that no solver answers takes up to 1.1 / 1.2 limits)
LOGIC_SHARE = 0.1


def _logics(constraints: list) -> tuple[str, ...]:
    """The logics' solvers tried before the default one (D538): QF_FPBV then QF_BV for a
    query of bit-vectors only (no floating point, no uninterpreted function, no quantifier),
    none otherwise. A logic's solver is never given a query outside its logic: the QF_BV
    solver answered "sat" in 0 ms to floating-point queries that are unsat. Floating-point
    queries stay with the default solver: measured over the quick tier, QF_FPBV first gained
    nothing there and cost 40 s."""
    seen: set[int] = set()
    todo = list(constraints)
    while todo:
        e = todo.pop()
        i = e.get_id()
        if i in seen:
            continue
        seen.add(i)
        if z3.is_quantifier(e) or z3.is_fp(e) or z3.is_fprm(e):
            return ()
        if z3.is_app(e):
            if e.num_args() and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                return ()
            todo.extend(e.children())
    return ("QF_FPBV", "QF_BV")


def solve(constraints: list, timeout_ms: int) -> tuple[z3.CheckSatResult, Any, str]:
    """One satisfiability query in a fresh Z3 context (the constraints translated there): the
    result, the model (translated back to the main context) when sat, Z3's reason when
    unknown.

    A fresh context because a context keeps state from its earlier queries (learned lemmas,
    the fp-to-bit-vector blasting cache) that can make a later query overrun its timeout many
    times over: with one context per process a query that stops at 2.6 s under a 2 s limit in a
    fresh context was seen to run 40-80 s after other queries had been solved
    (program/cover/717; docs/validate.md, D521). A context costs about 2 ms.

    For a pure bit-vector query the solvers of its logics (``_logics``) are tried first, each
    for ``LOGIC_SHARE`` of the limit, then Z3's default solver for the whole limit (D538): a
    query of program/seed0/61 (an integer abs_max) took 2 s in the default solver and 0.05 s
    in QF_FPBV's. Each is a decision procedure for the query, so an unsat from any is a proof
    and a model from any a model (replayed before it is believed)."""
    why = ""
    tries = [*_logics(constraints), None]
    for i, logic in enumerate(tries):
        last = i == len(tries) - 1
        limit = int(timeout_ms) if last else max(1, int(timeout_ms * LOGIC_SHARE))
        ctx = z3.Context()
        solver = z3.SolverFor(logic, ctx=ctx) if logic else z3.Solver(ctx=ctx)
        solver.set("timeout", limit)
        solver.add(*(c.translate(ctx) for c in constraints))
        # a memory ceiling per query (MB): one query (program/seed0/179, a LayerNorm on fp8)
        # ran 70 s and 7.7 GB under a 2 s limit in some processes — Z3 checks its timeout
        # cooperatively — and 6 s / 1.3 GB with the ceiling, the outcome unchanged (D530); an
        # exceeded ceiling is "unknown", so "failed to prove", never a verdict
        solver.set("max_memory", MAX_MEMORY_MB)
        try:
            r = solver.check()
        except z3.Z3Exception as e:  # a logic's solver refusing the query
            if last:
                raise
            why = str(e)
            continue
        if r == z3.sat:
            return r, solver.model().translate(z3.main_ctx()), ""
        if r == z3.unsat:
            return r, None, ""
        why = solver.reason_unknown()
    return z3.unknown, None, why


def _consts(t: z3.ExprRef, names: frozenset[str], memo: dict[int, frozenset[str]]
            ) -> frozenset[str]:
    """Which of the constants ``names`` (choices, unspecified values) occur in ``t``. One
    post-order walk per distinct node, shared through ``memo`` by every element of a check
    (the elements' terms share most of their nodes: a walk per element was 90 % of a RoPE
    check's time, D526)."""
    stack: list[tuple[z3.ExprRef, list | None]] = [(t, None)]
    while stack:
        e, kids = stack.pop()
        i = e.get_id()
        if i in memo:
            continue
        if kids is None:
            kids = e.children()
            if not kids:
                memo[i] = frozenset({str(e)}) & names if z3.is_const(e) else frozenset()
                continue
            stack.append((e, kids))
            stack.extend((k, None) for k in kids if k.get_id() not in memo)
        else:
            memo[i] = frozenset().union(*(memo[k.get_id()] for k in kids))
    return memo[t.get_id()]


#: named where a lowering's run-time check flags are not compared (D531)
PROBES_NOT_COMPARED = ("the run-time check kernels' flags are not compared (the source's "
                       "positions are data: it may raise)")


def check_lowering(module: Any, entry: str, fn: Any, tgt: Program, *,
                   timeout_ms: int = 10_000, runs: SymRuns | None = None,
                   narrow: bool = True, probes: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """Does the lowered ``tgt`` refine the HIR entry ``fn`` (elaborated, canonicalized)? The
    source is ``hir_smt``'s encoding; a counterexample is replayed against the reference
    evaluator (``evaluate(module, entry, inputs)``). ``probes``: the (flag, values) output
    buffers of the program's run-time check kernels (``lower.RunChecks.probed``): not results;
    where the source cannot raise, every flag element must be 0 (a check that fires on a
    program the reference runs is a wrong error, D531); where it can (a data-dependent position),
    the flags are not compared, named."""
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.validate.hir_smt import flatten, run_hir

    t0 = time.perf_counter()
    tbm = tgt.buffer_map()
    if len(fn.params) != len(tgt.inputs):
        return Outcome("unsupported", f"{len(fn.params)} parameters vs {len(tgt.inputs)} "
                       f"kernel-IR inputs", time.perf_counter() - t0)
    bits = input_vars(tgt)
    try:
        t = _run(runs, tgt, bits)
        vals = {}
        for p, n in zip(fn.params, tgt.inputs, strict=True):
            vals[p.name] = _vmap_in(bits[n], tbm[n].dtype)
        result, abstr = run_hir(fn, vals)
    except Unsupported as e:
        return Outcome("unsupported", str(e), time.perf_counter() - t0)
    results = flatten(result)
    probe_names = {n for pr in probes for n in pr}
    outs = [o for o in tgt.output_names() if o not in probe_names]
    if len(outs) != len(results):
        return Outcome("unsupported", f"{len(results)} HIR results vs {len(outs)} kernel-IR "
                       f"outputs", time.perf_counter() - t0)
    pairs = []
    for (res, dt), o in zip(results, outs, strict=True):
        b = t.outputs[o]
        if b.shape != res.shape or t.dtypes[o] != dt:
            return Outcome("unsupported", f"result {dt}{list(res.shape)} vs lowered "
                           f"{t.dtypes[o]}{list(b.shape)} ({o})", time.perf_counter() - t0)
        pairs.append((res, b))
    if probes:
        from tilefoundry.validate.hir_dynamic import GATHER_OOB

        if GATHER_OOB in abstr:
            abstr.add(PROBES_NOT_COMPARED)
        else:  # the reference raises nowhere: no check may fire
            for flag, _ in probes:
                f = t.outputs[flag]
                zero = E.const(np.int64(0), t.dtypes[flag])
                pairs.append((np.full(f.shape, zero, object), f))

    from tilefoundry.validate.hir_nn import ULP_FORMULA

    ulp_ops = sorted(a[len(ULP_FORMULA):].split(" ")[0] for a in abstr
                     if a.startswith(ULP_FORMULA))

    def rp(model: z3.ModelRef) -> Counterexample:
        inputs = _model_inputs(model, tgt, bits)
        refs = flat_arrays(evaluate(module, entry, inputs))
        to, ttemps = _temps(tgt, inputs)
        diff = []
        for o, ref in zip(outs, refs, strict=True):
            got = to[o]
            bad = ~_same(np.asarray(ref).astype(got.dtype), got).reshape(-1)
            diff += [f"{o}[{i}]" for i in np.nonzero(bad)[0]]
        diff, note = judge_by_contract(module, entry, inputs, [to[o] for o in outs], diff,
                                       ulp_ops)
        if PROBES_NOT_COMPARED not in abstr:  # a check that fires where the reference runs
            for flag, _ in probes:
                diff += [f"{flag}[{i}] (a run-time check fired)"
                         for i in np.nonzero(np.asarray(to[flag]).reshape(-1))[0]]
        return Counterexample(dict(zip(tgt.inputs, inputs, strict=True)),
                              {f"reference {o}": np.asarray(r) for o, r in zip(outs, refs,
                                                                                 strict=True)},
                              to, {}, ttemps, diff, note)

    return decide(pairs, abstr, t.abstractions, rp, t0, timeout_ms,
                  _hints(tgt, bits) if narrow else None)


def judge_by_contract(module: Any, entry: str, inputs: list, observed: list[np.ndarray],
                      diff: list[str], ulp_ops: list[str]) -> tuple[list[str], str]:
    """A replay's differing elements, judged by the contracts when the HIR holds an op encoded
    as its ULP contract's formula (``ulp_ops``, D523): bits that differ from the reference but
    that the oracle does not reject (``oracle.compare.check``: PASS or UNJUDGED) are no proof of
    a bug, so the differing list is emptied and the note says why; otherwise unchanged."""
    if not diff or not ulp_ops:
        return diff, ""
    from tilefoundry.oracle.compare import FAIL, check

    v = check(module, entry, inputs, observed)
    if v.status == FAIL:
        return diff, ""
    return [], (f"{len(diff)} output element(s) differ from the reference in bits, but the "
                f"oracle judges them {v.status} under the contracts of {', '.join(ulp_ops)}")


def flat_arrays(v: Any) -> list[np.ndarray]:
    """The reference's result as its tensors in order (a tuple's fields depth first)."""
    if isinstance(v, tuple | list):
        return [a for f in v for a in flat_arrays(f)]
    return [np.asarray(v)]


def _vmap_in(bits: np.ndarray, dt: str) -> np.ndarray:
    from tilefoundry.validate.symexec import _vmap

    return _vmap(lambda x: E.from_input_bits(x, dt), bits) if bits.size else bits
