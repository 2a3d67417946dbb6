"""Diagnosis: the least relaxation sets under which a rejected output is admitted.

The strict verdict (``compare.check``) is the reference and stays exactly as it is. For each
output it rejects, ``diagnose`` asks which of the stated relaxations (``oracle/relax.py``)
would admit every rejected element: it evaluates the program's enclosures under candidate sets
(``enclosure_eval.evaluate_relaxed``) — first the set of every relaxation that applies to an op
of the program (what no relaxation admits there is a genuine wrong result: "admitted under
none"), then smaller sets in increasing size — and reports the **minimal** sets (no proper
subset admits), for the case, per output and per element class (``compare.failure_classes``).

An element is admitted under a set S when the strict contract accepts it, or when a widening of
S reached that element (elementwise through broadcasting; everywhere downstream of a reduction,
a movement or a function call) and S's enclosure contains it. Zero signs are judged inside a relaxed
enclosure (a zero of a sign the enclosure does not reach is rejected) unless S has ``nsz``.

``judge_under(admit)`` decides a declared set (``--admit``): every rejected element of every
FAIL output admitted under it (one evaluation).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tilefoundry.oracle.compare import FAIL, Verdict, as_outputs, class_codes, gather_outputs
from tilefoundry.oracle.relax import NAMES, NARROW, Admit, applicable
from tilefoundry.semantics.formats import dtype_of

__all__ = ["ClassDiagnosis", "Diagnosis", "diagnose", "judge_under", "program_relaxations"]

#: the most relaxed evaluations one diagnosis may spend (beyond it, one greedy minimal set)
MAX_EVALUATIONS = 40


@dataclass(frozen=True)
class ClassDiagnosis:
    name: str
    count: int
    least: tuple[tuple[str, ...], ...]
    none: int  # elements of the class admitted under no set

    def to_json(self) -> dict:
        return {"class": self.name, "count": self.count, "least": [list(s) for s in self.least],
                "none": self.none}


@dataclass(frozen=True)
class Diagnosis:
    """``least``: the minimal relaxation sets admitting every rejected element (empty when
    some element is admitted under none); ``none``: elements no applicable set admits;
    ``searched``: the relaxations that apply to the program; ``greedy``: the search hit its
    budget and ``least`` holds one minimal set found greedily (others may exist)."""

    least: tuple[tuple[str, ...], ...]
    none: int
    rejected: int
    searched: tuple[str, ...]
    evaluations: int
    classes: tuple[ClassDiagnosis, ...] = ()
    greedy: bool = False
    op: str = ""

    @property
    def label(self) -> str:
        if self.none or not self.least:
            return "none"
        return " | ".join("+".join(s) for s in self.least)

    def line(self) -> str:
        if self.none or not self.least:
            tail = f"{self.none} of {self.rejected} rejected element(s) no relaxation " \
                   f"admits (searched: {', '.join(self.searched) or 'none applies'})"
            part = [c for c in self.classes if c.least and not c.none]
            if part:
                tail += "; the others: " + "; ".join(
                    f"{c.name} {' | '.join('+'.join(s) for s in c.least)}" for c in part[:4])
            return "admitted under none: " + tail
        sets = " or ".join("{" + ", ".join(s) + "}" for s in self.least)
        return f"admitted under {sets}" + (" (one minimal set; the search hit its budget)"
                                           if self.greedy else "")

    def to_json(self) -> dict:
        return {"least": [list(s) for s in self.least], "none": self.none,
                "rejected": self.rejected, "searched": list(self.searched),
                "evaluations": self.evaluations, "greedy": self.greedy, "op": self.op,
                "classes": [c.to_json() for c in self.classes]}


def program_relaxations(fn: Any) -> tuple[str, ...]:
    """The relaxations that apply to some op reachable from ``fn`` (callee bodies included),
    in table order."""
    from tilefoundry.semantics.ir import Call, Function, loop_children, reachable

    found: set[str] = set()
    narrow = False

    def children(e: Any) -> list:  # callee bodies are entered too
        kids = loop_children(e)
        if isinstance(e, Call) and isinstance(e.op, Function) and e.op.body is not None:
            kids.append(e.op.body)
        return kids

    body = getattr(fn, "body", None)
    for e in reachable(body, children) if body is not None else ():
        if isinstance(e, Call) and not isinstance(e.op, Function):
            found |= applicable(e.op)
        t = getattr(e, "checked_type", None) if getattr(e, "has_type", False) else None
        if getattr(t, "dtype", None) in NARROW:
            narrow = True
    if not narrow:
        found.discard("excess")
    return tuple(n for n in NAMES if n in found)


def contains_signed(enc: Any, o: np.ndarray, nsz: bool) -> np.ndarray:
    """``enc.contains(o)``, with a zero's sign judged unless ``nsz``: -0 needs the enclosure
    to reach below 0 (or to -0), +0 above (or to +0)."""
    from tilefoundry.oracle.enclosure import as_f64

    base = np.asarray(enc.contains(o), bool)
    if nsz or not dtype_of(o).is_float:
        return base
    ow = as_f64(o)
    zero = ow == 0
    if not zero.any():
        return base
    lo, hi = as_f64(enc.lo), as_f64(enc.hi)
    lo_neg = (lo < 0) | ((lo == 0) & np.signbit(lo))
    hi_pos = (hi > 0) | ((hi == 0) & ~np.signbit(hi))
    return np.where(zero, base & np.where(np.signbit(ow), lo_neg, hi_pos), base)


class _Search:
    """Per candidate set, per FAIL output: the elements admitted (cached evaluations)."""

    def __init__(self, module: Any, entry: str, inputs: Sequence[Any], fails: list,
                 expected: list, got: list):
        self.module, self.entry, self.inputs = module, entry, inputs
        self.fails, self.expected, self.got = fails, expected, got
        self.cache: dict[frozenset, list[np.ndarray]] = {}

    def admitted(self, s: frozenset) -> list[np.ndarray]:
        hit = self.cache.get(s)
        if hit is not None:
            return hit
        from tilefoundry.oracle.enclosure import Enc
        from tilefoundry.oracle.enclosure_eval import evaluate_relaxed

        out = []
        try:
            encs, reached = evaluate_relaxed(self.module, self.entry, self.inputs,
                                             Admit.of(*s))
        except Exception:  # a widening the program's values defeat: nothing admitted by it
            encs, reached = [None] * len(self.expected), [False] * len(self.expected)
        for ov in self.fails:
            ok = np.asarray(ov.ok, bool).reshape(self.expected[ov.output].shape)
            enc = encs[ov.output]
            if isinstance(enc, Enc):
                o = self.got[ov.output]
                ok = ok | (contains_signed(enc, o, "nsz" in s).reshape(ok.shape) &
                           np.asarray(reached[ov.output], bool).reshape(ok.shape))
            out.append(ok)
        self.cache[s] = out
        return out


def _minimal(search: _Search, names: tuple[str, ...], groups: dict[Any, list[np.ndarray]],
             budget: int) -> tuple[dict[Any, list[frozenset]], bool]:
    """Per group (a per-output list of target masks: the elements to admit), the minimal sets
    among the subsets of ``names`` (size order), within ``budget`` evaluations."""
    found: dict[Any, list[frozenset]] = {g: [] for g in groups}

    def admits(s: frozenset, targets: list[np.ndarray]) -> bool:
        adm = search.admitted(s)
        return all(bool(np.all(a[t])) for a, t in zip(adm, targets, strict=True))

    greedy = False
    for k in range(1, len(names) + 1):
        for combo in itertools.combinations(names, k):
            s = frozenset(combo)
            # least sets: a group found at a smaller size is done (its minimum is known)
            todo = [g for g in groups if not found[g] or len(next(iter(found[g]))) == k]
            todo = [g for g in todo if not any(m <= s for m in found[g])]
            if not todo:
                continue
            if s not in search.cache and len(search.cache) >= budget:
                greedy = True
                break
            for g in todo:
                if admits(s, groups[g]):
                    found[g].append(s)
        if greedy:
            break
    if greedy:  # the rest: one minimal set each, dropping relaxations greedily from the full
        for g, targets in groups.items():
            if found[g]:
                continue
            cur = set(names)
            for n in names:
                trial = frozenset(cur - {n})
                if trial and admits(trial, targets):
                    cur.discard(n)
            found[g] = [frozenset(cur)]
    return found, greedy


def _order(s: frozenset) -> tuple[str, ...]:
    return tuple(n for n in NAMES if n in s)


def diagnose(module: Any, entry: str, inputs: Sequence[Any], observed: Any, verdict: Verdict,
             *, budget: int = MAX_EVALUATIONS) -> Verdict:
    """``verdict`` with a ``Diagnosis`` on each FAIL output and on the verdict itself (the
    sets admitting every FAIL output). A verdict without FAIL outputs is returned as is."""
    fails = [o for o in verdict.outputs if o.status == FAIL and o.ok is not None]
    if not fails or verdict.reference is None:
        return verdict
    ev = verdict.reference
    expected = [gather_outputs(x) for x in as_outputs(ev.value)]
    got = [np.asarray(gather_outputs(x)) for x in as_outputs(observed)]
    fn = ev.entry_fn
    names = program_relaxations(fn) if fn is not None else NAMES
    search = _Search(module, entry, inputs, fails, expected, got)
    full = frozenset(names)
    adm_full = search.admitted(full) if names else \
        [np.asarray(o.ok, bool).reshape(expected[o.output].shape) for o in fails]
    bads = [~np.asarray(o.ok, bool).reshape(expected[o.output].shape) for o in fails]
    # the elements each group must have admitted: its rejected ones that some set admits
    targets = [b & a for b, a in zip(bads, adm_full, strict=True)]
    nones = [b & ~a for b, a in zip(bads, adm_full, strict=True)]
    zero = [np.zeros_like(t) for t in targets]
    groups: dict[Any, list[np.ndarray]] = {"case": targets}
    codes = []
    for j, o in enumerate(fails):
        groups[("out", j)] = [t if i == j else zero[i] for i, t in enumerate(targets)]
        code, name = class_codes(expected[o.output], got[o.output])
        codes.append((code, name))
        for c in np.unique(code[bads[j]]):
            groups[("cls", j, int(c))] = [t & (code == c) if i == j else zero[i]
                                          for i, t in enumerate(targets)]
    found, greedy = _minimal(search, names, {g: t for g, t in groups.items()
                                             if any(x.any() for x in t)}, budget)

    def least(g: Any) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted((_order(s) for s in found.get(g, [])), key=lambda t: (len(t), t)))

    outs = list(verdict.outputs)
    total_none = 0
    for j, o in enumerate(fails):
        code, name = codes[j]
        bad = bads[j]
        cls = []
        for c in sorted(np.unique(code[bad]), key=lambda c: -int((code[bad] == c).sum())):
            m = bad & (code == c)
            cls.append(ClassDiagnosis(name(int(c)), int(m.sum()), least(("cls", j, int(c))),
                                      int((nones[j] & m).sum())))
        n_none = int(nones[j].sum())
        total_none += n_none
        d = Diagnosis(least(("out", j)) if not n_none else (), n_none, int(bad.sum()), names,
                      len(search.cache), tuple(cls), greedy, producer_label(fn, o.output))
        outs[outs.index(o)] = replace(o, diagnosis=d)
    case = Diagnosis(least("case") if not total_none else (), total_none,
                     int(sum(int(b.sum()) for b in bads)), names, len(search.cache), (),
                     greedy)
    return replace(verdict, outputs=tuple(outs), diagnosis=case)


def producer_label(fn: Any, i: int) -> str:
    from tilefoundry.oracle.compare import _outputs, _producer
    from tilefoundry.oracle.relax import op_label
    from tilefoundry.semantics.ir import Call

    try:
        node, idx = _outputs(fn)[i]
        prod, _ = _producer(node, idx)
    except Exception:
        return ""
    return op_label(prod.op) if isinstance(prod, Call) else type(prod).__name__


def judge_under(module: Any, entry: str, inputs: Sequence[Any], observed: Any,
                verdict: Verdict, admit: Admit) -> bool:
    """Is every rejected element of every FAIL output admitted under the declared ``admit``?"""
    fails = [o for o in verdict.outputs if o.status == FAIL and o.ok is not None]
    if not fails or verdict.reference is None or not admit:
        return False
    if any(o.status == FAIL and o.ok is None for o in verdict.outputs):
        return False
    from tilefoundry.oracle.enclosure import Enc
    from tilefoundry.oracle.enclosure_eval import evaluate_relaxed

    expected = [gather_outputs(x) for x in as_outputs(verdict.reference.value)]
    got = [np.asarray(gather_outputs(x)) for x in as_outputs(observed)]
    encs, reached = evaluate_relaxed(module, entry, inputs, admit)
    nsz = "nsz" in admit.names
    for o in fails:
        ok = np.asarray(o.ok, bool).reshape(expected[o.output].shape)
        enc = encs[o.output]
        if isinstance(enc, Enc):
            ok = ok | (contains_signed(enc, got[o.output], nsz).reshape(ok.shape) &
                       np.asarray(reached[o.output], bool).reshape(ok.shape))
        if not ok.all():
            return False
    return True
