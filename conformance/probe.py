"""``tilefoundry conformance probe``: derive a first capability set by running a backend.

A backend author starting out does not know which of the catalog's op × dtype combinations the
backend runs. ``probe`` picks, from a tier of the catalog, the smallest **ordinary** case of
every **probe key** — one op (kind-level name where the op has kinds) × the dtypes it touches ×
the policy / overflow / rounding attributes it carries × for a Cast its (source, destination)
pairs, in a program with no structural feature and no mesh — plus the smallest case needing
exactly one structural feature (tuples, calls, loops, dispatch) and one sharded case per mesh
shape. It runs them in the runner (workers, time limit, crash isolation) with every capability
claimed, and records what the backend **accepts**: a case whose verdict is PASS, FAIL or
UNJUDGED ran and returned well-formed output (a FAIL is a wrong answer, which the first run
must show, not hide); ERROR, CRASH, TIMEOUT and NOT_SUPPORTED (``BackendUnsupportedError``)
are rejections.

Ordinary (D301, ``probe_edges``): non-empty inputs, finite and without −0, and a finite,
non-empty reference result. Each key's smallest case of every **edge class** (empty, special
input values, non-finite result) runs too and is reported as a **finding**; it never drops or
narrows a claim. A key with no ordinary case in the tier is decided by its smallest case, and
the output says so.

The derived set claims, per op, exactly the dtypes of its accepted cases (``op_dtypes``), the
policies / modes accepted cases carry (globally and per op in ``op_attrs``), exactly the Cast
pairs accepted (``cast_pairs``, D300: a passing f16 → f32 Cast claims f16 → f32, not every
target), the features and mesh shapes whose cases were accepted. It is a starting point
written as JSON (``--out``), to be read by ``run --capabilities FILE`` or
``Capabilities.load`` in the backend, and edited: a rejection may be a bug rather than a
missing feature (each is listed with its message).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilefoundry.conformance.backend import ALL_FEATURES, Capabilities, requirements
from tilefoundry.conformance.cases import Case

__all__ = ["ACCEPTED", "ProbeResult", "derive", "probe", "probe_cases"]

ACCEPTED = ("PASS", "FAIL", "UNJUDGED")


@dataclass
class ProbeCase:
    case: Case
    key: tuple  # ("op", name, dtypes, attrs, cast pairs) / ("feature", f) / ("mesh", shapes)
    req: Any
    #: None: an ordinary case; else its edge class (``probe_edges.EDGE_CLASSES``)
    edge: str | None = None
    #: whether its verdict decides a claim (an edge case only where its key has no ordinary
    #: case); a finding-only edge case never narrows a claim
    claims: bool = True


@dataclass
class ProbeResult:
    caps: Capabilities
    cases: list[ProbeCase]
    verdicts: dict[str, dict] = field(default_factory=dict)  # case id -> record

    def _verdict(self, p: ProbeCase) -> str | None:
        return self.verdicts.get(p.case.id, {}).get("verdict")

    @property
    def claiming(self) -> list[ProbeCase]:
        return [p for p in self.cases if p.claims]

    @property
    def rejected(self) -> list[tuple[ProbeCase, dict]]:
        return [(p, self.verdicts[p.case.id]) for p in self.claiming
                if self._verdict(p) not in ACCEPTED]

    @property
    def edge_only(self) -> list[ProbeCase]:
        """The claiming probes that are edge cases: their key has no ordinary case."""
        return [p for p in self.claiming if p.edge is not None]

    @property
    def findings(self) -> list[tuple[ProbeCase, dict]]:
        """The edge cases whose verdict is not PASS, of the keys the probe claims (an edge
        case of a rejected key tells nothing the rejection does not)."""
        ok = {p.key for p in self.claiming if self._verdict(p) in ACCEPTED}
        return [(p, self.verdicts.get(p.case.id, {})) for p in self.cases
                if not p.claims and p.key in ok and self._verdict(p) != "PASS"]


def _size(inputs: list) -> int:
    """Elements of the inputs (a Sharded input or a scalar counts as its size or 1)."""
    n = 0
    for x in inputs:
        size = getattr(x, "size", 1)
        n += size if isinstance(size, int) else 1
    return n


def _op_names(req: Any) -> list[str]:
    kinds = {o.split(".")[0] for o in req.ops if "." in o}
    return sorted(o for o in req.ops if "." in o or o not in kinds)


def _keys(req: Any) -> list[tuple]:
    names = _op_names(req)
    if req.mesh:
        return [("mesh", tuple(sorted(req.mesh_shapes)))]
    if req.features:
        return [("feature", next(iter(req.features)))] if len(req.features) == 1 else []
    if len(names) == 1:
        attrs = tuple(sorted((a, v) for o, a, v in req.op_attrs if o == names[0]))
        pairs = tuple(sorted((a.value, b.value) for a, b in req.cast_pairs))
        return [("op", names[0], tuple(sorted(d.value for d in req.dtypes)), attrs, pairs)]
    return []


def _result_edge(c: Case) -> str | None:
    from tilefoundry.conformance.probe_edges import result_edge

    try:
        return result_edge(*c.build())
    except Exception:  # the reference raises on it: not an ordinary case
        return "non-finite"


def _first_ordinary(probes: Any, tried: list, tries: int) -> ProbeCase | None:
    """The first of ``probes`` whose reference result is ordinary, evaluating at most
    ``tries`` of them (each evaluated one is appended to ``tried``, its edge class set)."""
    for p in probes:
        if len(tried) == tries:
            return None
        tried.append(p)
        p.edge = _result_edge(p.case)
        if p.edge is None:
            return p
    return None


def probe_cases(cases: list[Case], *, evaluate: bool = True) -> list[ProbeCase]:
    """Per probe key among ``cases`` (see the module docstring): the smallest **ordinary**
    case (non-empty, finite inputs without −0, a finite non-empty reference result), which
    decides the claim, and the smallest case of each edge class (``probe_edges``), probed for
    the findings only. A key with no ordinary case is decided by its smallest case, marked
    with its edge class. ``evaluate=False`` classifies by the inputs alone. Cases that cannot
    be built or type-checked are left out."""
    from tilefoundry.conformance.probe_edges import (
        EDGE_CLASSES,
        ORDINARY_TRIES,
        input_edge,
        ordinary_variant,
    )

    by_key: dict[tuple, list[tuple[int, int, ProbeCase]]] = {}
    for i, c in enumerate(cases):
        if c.expect_error is not None:
            continue
        try:
            module, _, inputs = c.build()
            req = requirements(module)
        except Exception:  # a harness problem: the runner reports such cases, not the probe
            continue
        edge, size = input_edge(inputs), _size(inputs)
        for k in _keys(req):
            by_key.setdefault(k, []).append((size, i, ProbeCase(c, k, req, edge)))
    out: list[ProbeCase] = []
    for k, cands in by_key.items():
        cands.sort(key=lambda t: (t[0], t[1]))
        # catalog cases with ordinary inputs first, then ordinary variants of special ones;
        # each list gets ORDINARY_TRIES reference evaluations
        plain = [p for _, _, p in cands if p.edge is None]
        ordinary = plain[0] if plain and not evaluate else None
        tried: list[ProbeCase] = []
        if evaluate:
            ordinary = _first_ordinary(plain, tried, ORDINARY_TRIES) or _first_ordinary(
                (ProbeCase(ordinary_variant(p.case), k, p.req)
                 for _, _, p in cands if p.edge == "special"), [], ORDINARY_TRIES)
        first = {}
        for _, _, p in cands:
            if p.edge is not None and p.edge not in first:
                first[p.edge] = p
        claim = ordinary or (tried[0] if tried else cands[0][2])
        out.append(claim)
        out += [ProbeCase(p.case, k, p.req, p.edge, claims=False)
                for e, p in sorted(first.items(), key=lambda t: EDGE_CLASSES.index(t[0]))
                if p is not claim]
    return sorted(out, key=lambda p: (p.case.id, p.claims))


def derive(probes: list[ProbeCase], verdicts: dict[str, dict]) -> Capabilities:
    """The capability set the accepted claiming probe cases justify (edge cases probed for
    findings only never enter it)."""
    from tilefoundry.semantics.formats import DType

    op_dtypes: dict[str, set[str]] = defaultdict(set)
    op_attrs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    dtypes: set[str] = set()
    glob: dict[str, set[str]] = defaultdict(set)
    feats: set[str] = set()
    shapes: set[tuple[int, ...]] = set()
    pairs: set[tuple[str, str]] = set()
    for p in probes:
        if not p.claims or verdicts.get(p.case.id, {}).get("verdict") not in ACCEPTED:
            continue
        kind = p.key[0]
        if kind == "op":
            _, name, dts, attrs, cast = p.key
            op_dtypes[name].update(dts)
            dtypes.update(dts)
            pairs.update(cast)
            for a, v in attrs:
                op_attrs[name][a].add(v)
                glob[a].add(v)
        elif kind == "feature":
            feats.add(p.key[1])
        else:
            shapes.update(p.req.mesh_shapes)
    return Capabilities(
        ops=frozenset(op_dtypes), dtypes=frozenset(DType(d) for d in dtypes),
        policies=frozenset(glob["policy"]), overflow_modes=frozenset(glob["overflow"]),
        rounding_modes=frozenset(glob["rounding"]), features=frozenset(feats) & ALL_FEATURES,
        mesh=bool(shapes), mesh_shapes=frozenset(shapes) if shapes else None,
        op_dtypes={k: frozenset(DType(d) for d in v) for k, v in op_dtypes.items()},
        op_attrs={k: {a: frozenset(x) for a, x in v.items()} for k, v in op_attrs.items()},
        # no Cast claimed: no pair to state (the file reads as one written before D300)
        cast_pairs=frozenset((DType(a), DType(b)) for a, b in pairs)
        if "Cast" in op_dtypes else None)


def probe(backend_spec: str, *, tier: str = "quick", seed: int = 0, jobs: int = 1,
          timeout_s: float = 30.0, work_jsonl: str | Path, catalog: str | None = None,
          case_globs: list[str] | None = None, progress: bool = False) -> ProbeResult:
    """Pick the probe cases of ``tier``, run them against ``backend_spec`` claiming everything,
    and derive the capability set (see the module docstring)."""
    from tilefoundry.conformance import runner, selection
    from tilefoundry.conformance.report import read_jsonl

    everything = Capabilities.everything(mesh=True)
    cat = selection.load_catalog(seed, catalog=catalog, backend_caps=everything)
    # the capability-directed cases compose what a claim holds; the probe derives the claim
    probes = probe_cases([c for c in selection.select_cases(cat, tier, case_globs)
                          if c.family != "capability"])
    if not probes:
        raise selection.ConformanceError(f"probe: tier {tier!r} has no case to probe with")
    runner.run(backend_spec, [p.case for p in probes], jobs=jobs, timeout_s=timeout_s,
               seed=seed, out_jsonl=work_jsonl, progress=progress, caps_override=everything)
    _, recs = read_jsonl(work_jsonl)
    return ProbeResult(derive(probes, recs), probes, recs)


def write(path: str | Path, result: ProbeResult) -> None:
    Path(path).write_text(json.dumps(result.caps.to_json(), indent=1) + "\n")


def _what(p: ProbeCase) -> str:
    if p.key[0] != "op":
        return f"{p.key[0]} {p.key[1]}"
    _, name, dts, _, pairs = p.key
    return name + (" " + ",".join(f"{a}->{b}" for a, b in pairs) if pairs else
                   (" on " + ",".join(dts) if dts else ""))


def report_lines(res: ProbeResult, limit: int = 40) -> list[str]:
    """The probe's terminal report after its head line: the claims, the rejections, the keys
    decided on an edge case, the edge-case findings."""
    caps, rej = res.caps, res.rejected
    pairs = sorted(f"{a.value}->{b.value}" for a, b in caps.cast_pairs or ())
    out = [f"claims: {len(caps.ops or ())} op(s) {sorted(caps.ops or ())}, dtypes "
           f"{sorted(d.value for d in caps.dtypes)}, cast pairs {pairs or 'none'}, policies "
           f"{sorted(caps.policies)}, overflow {sorted(caps.overflow_modes)}, rounding "
           f"{sorted(caps.rounding_modes)}, features {sorted(caps.features)}, mesh shapes "
           f"{sorted(caps.mesh_shapes) if caps.mesh_shapes else 'none'}"]
    for p, r in rej[:limit]:
        out.append(f"rejected {r.get('verdict', '?'):8} {p.case.id} (probes {_what(p)}): "
                   f"{str(r.get('message', ''))[:160]}")
    if len(rej) > limit:
        out.append(f"... and {len(rej) - limit} more rejection(s) (see the --jsonl file)")
    edge = res.edge_only
    if edge:
        by = Counter(str(p.edge) for p in edge)
        out.append(f"{len(edge)} key(s) have no ordinary case in the tier and were decided on "
                   f"their smallest case (" + ", ".join(f"{k} {n}" for k, n in by.most_common())
                   + "), e.g. " + ", ".join(f"{_what(p)} ({p.case.id})" for p in edge[:3]))
    found = res.findings
    ok = {p.key for p in res.claiming if res._verdict(p) in ACCEPTED}
    n_edge = sum(not p.claims and p.key in ok for p in res.cases)
    out.append(f"edge-case findings: {len(found)} of the {n_edge} edge case(s) of claimed keys "
               f"not PASS (empty, special values, non-finite results; reported, never used to "
               f"narrow a claim)" + (":" if found else ""))
    for p, r in found[:limit]:
        out.append(f"  finding {r.get('verdict', '?'):8} {p.case.id} ({_what(p)}, {p.edge}): "
                   f"{str(r.get('message', ''))[:160]}")
    if len(found) > limit:
        out.append(f"  ... and {len(found) - limit} more finding(s) (see the --jsonl file)")
    return out
