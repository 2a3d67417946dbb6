"""``tilefoundry conformance probe``: derive a first capability set by running a backend.

A backend author starting out does not know which of the catalog's op × dtype combinations the
backend runs. ``probe`` picks, from a tier of the catalog, the smallest case of every
**probe key** — one op (kind-level name where the op has kinds) × the dtypes it touches × the
policy / overflow / rounding attributes it carries, in a program with no structural feature and
no mesh — plus the smallest case needing exactly one structural feature (tuples, calls, loops,
dispatch) and one sharded case per mesh shape. It runs them in the runner (workers, time limit,
crash isolation) with every capability claimed, and records what the backend **accepts**: a
case whose verdict is PASS, FAIL or UNJUDGED ran and returned well-formed output (a FAIL is a
wrong answer, which the first run must show, not hide); ERROR, CRASH, TIMEOUT and
NOT_SUPPORTED (``BackendUnsupportedError``) are rejections.

The derived set claims, per op, exactly the dtypes of its accepted cases (``op_dtypes``), the
policies / modes accepted cases carry (globally and per op in ``op_attrs``), the features and
mesh shapes whose cases were accepted. It is a starting point written as JSON (``--out``), to
be read by ``run --capabilities FILE`` or ``Capabilities.load`` in the backend, and edited: a
rejection may be a bug rather than a missing feature (each is listed with its message).
"""

from __future__ import annotations

import json
from collections import defaultdict
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
    key: tuple  # what it probes: ("op", name, dtypes, attrs) / ("feature", f) / ("mesh", shape)
    req: Any


@dataclass
class ProbeResult:
    caps: Capabilities
    cases: list[ProbeCase]
    verdicts: dict[str, dict] = field(default_factory=dict)  # case id -> record

    @property
    def rejected(self) -> list[tuple[ProbeCase, dict]]:
        return [(p, self.verdicts[p.case.id]) for p in self.cases
                if self.verdicts.get(p.case.id, {}).get("verdict") not in ACCEPTED]


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


def probe_cases(cases: list[Case]) -> list[ProbeCase]:
    """The smallest case of every probe key among ``cases`` (see the module docstring);
    cases that cannot be built or type-checked are left out."""
    best: dict[tuple, tuple[int, ProbeCase]] = {}
    for c in cases:
        if c.expect_error is not None:
            continue
        try:
            module, _, inputs = c.build()
            req = requirements(module)
        except Exception:  # a harness problem: the runner reports such cases, not the probe
            continue
        names = _op_names(req)
        if req.mesh:
            keys = [("mesh", tuple(sorted(req.mesh_shapes)))]
        elif req.features:
            keys = [("feature", next(iter(req.features)))] if len(req.features) == 1 else []
        elif len(names) == 1:
            attrs = tuple(sorted((a, v) for o, a, v in req.op_attrs if o == names[0]))
            keys = [("op", names[0], tuple(sorted(d.value for d in req.dtypes)), attrs)]
        else:
            keys = []
        size = _size(inputs)
        for k in keys:
            if k not in best or size < best[k][0]:
                best[k] = (size, ProbeCase(c, k, req))
    return [p for _, p in sorted(best.values(), key=lambda t: t[1].case.id)]


def derive(probes: list[ProbeCase], verdicts: dict[str, dict]) -> Capabilities:
    """The capability set the accepted probe cases justify."""
    from tilefoundry.semantics.formats import DType

    op_dtypes: dict[str, set[str]] = defaultdict(set)
    op_attrs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    dtypes: set[str] = set()
    glob: dict[str, set[str]] = defaultdict(set)
    feats: set[str] = set()
    shapes: set[tuple[int, ...]] = set()
    for p in probes:
        if verdicts.get(p.case.id, {}).get("verdict") not in ACCEPTED:
            continue
        kind = p.key[0]
        if kind == "op":
            _, name, dts, attrs = p.key
            op_dtypes[name].update(dts)
            dtypes.update(dts)
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
        op_attrs={k: {a: frozenset(x) for a, x in v.items()} for k, v in op_attrs.items()})


def probe(backend_spec: str, *, tier: str = "quick", seed: int = 0, jobs: int = 1,
          timeout_s: float = 30.0, work_jsonl: str | Path, catalog: str | None = None,
          case_globs: list[str] | None = None, progress: bool = False) -> ProbeResult:
    """Pick the probe cases of ``tier``, run them against ``backend_spec`` claiming everything,
    and derive the capability set (see the module docstring)."""
    from tilefoundry.conformance import runner
    from tilefoundry.conformance.report import read_jsonl

    everything = Capabilities.everything(mesh=True)
    cat = runner.load_catalog(seed, catalog=catalog, backend_caps=everything)
    # the capability-directed cases compose what a claim holds; the probe derives the claim
    probes = probe_cases([c for c in runner.select_cases(cat, tier, case_globs)
                          if c.family != "capability"])
    if not probes:
        raise runner.ConformanceError(f"probe: tier {tier!r} has no case to probe with")
    runner.run(backend_spec, [p.case for p in probes], jobs=jobs, timeout_s=timeout_s,
               seed=seed, out_jsonl=work_jsonl, progress=progress, caps_override=everything)
    _, recs = read_jsonl(work_jsonl)
    return ProbeResult(derive(probes, recs), probes, recs)


def write(path: str | Path, result: ProbeResult) -> None:
    Path(path).write_text(json.dumps(result.caps.to_json(), indent=1) + "\n")
