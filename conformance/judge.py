"""One case's verdict (split from ``runner.py``, D380): build the case, compute its
requirements, evaluate the reference, compile and run the backend, judge the outputs with
``oracle.compare.check``, and write the reproducer (reduced where asked). It runs inside a
worker (``workers.py``) or a Ray task (``ray_executor.py``); ``_PHASES`` is what it reports
it is doing, so that the runner can name the phase a worker died or hung in.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import os
import random
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import (
    Capabilities,
    reference_check,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.protocol import compile_for
from tilefoundry.conformance.reduction_orders import judged_module
from tilefoundry.conformance.selection import _derive
from tilefoundry.errors import BackendUnsupportedError, RunTimeCheckError

BAD_VERDICTS = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")


#: the verdicts --flake-retries runs again (XPASS is the manifest's, applied after the attempts)
_RETRYABLE = ("FAIL", "CRASH", "TIMEOUT", "ERROR")


# what a worker is doing (a shared int the runner reads when the worker dies or hangs)
_PHASES = ("idle", "building the case", "computing its requirements",
           "evaluating the reference", "backend.compile", "backend.run", "the oracle check",
           "writing the reproducer", "reducing the failure")


_IDLE, _BUILD, _REQ, _REF, _COMPILE, _RUN, _CHECK, _REPRO, _REDUCE = range(len(_PHASES))


def _run_one(backend: Any, load_error: str, caps: Capabilities, case: Case, seed: int,
             opts: dict, phase: Any, conn: Any, idx: int) -> dict:
    """One case in a worker (a forked one, or a Ray worker: ``ray_executor``): ``_execute``
    with the case's warnings recorded on it and a harness bug reported on the case. ``phase``
    has a ``value`` (an int of ``_PHASES``); ``conn`` has ``send`` (the "meta" / "partial"
    messages)."""
    caught: list[tuple] = []
    with warnings.catch_warnings():
        # every warning of the case is recorded on the case (with the phase it came from)
        # instead of going, unattributed, to the runner's stderr
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, *a, _c=caught, \
            **k: _c.append((_PHASES[phase.value], category.__name__,
                           os.path.basename(str(filename)), lineno, str(message)))
        try:
            out = _execute(backend, load_error, caps, case, seed, opts, phase, conn, idx)
        except Exception as e:  # a harness bug: report it on the case, keep the worker
            out = {"verdict": "ERROR", "harness": True,
                   "message": f"harness: {type(e).__name__}: {_short(str(e))}"}
    if caught:
        out["warnings"] = _warning_summary(caught)
    phase.value = _IDLE
    return out


def _warning_summary(caught: list[tuple]) -> list[dict]:
    """The distinct warnings of a case (phase, category, file:line, message) with counts."""
    counts = collections.Counter(caught)
    return [{"phase": ph, "category": cat, "where": f"{f}:{ln}", "message": msg[:300],
             "count": n} for (ph, cat, f, ln, msg), n in list(counts.items())[:10]]


def _short(s: str, n: int = 2000) -> str:
    s = " ".join(s.split()) if "\n" in s and len(s) > 200 else s
    return s if len(s) <= n else s[:n] + f"... ({len(s) - n} more characters)"


def _library_file(path: str) -> bool:
    """A frame outside the backend author's code: the standard library, an installed
    third-party package, or this runner."""
    p = os.path.abspath(path)
    return p in _RUNNER_FILES or p.startswith(_STDLIB) or \
        any(part in ("site-packages", "dist-packages") for part in p.split(os.sep))


_STDLIB = os.path.abspath(os.path.dirname(os.__file__)) + os.sep
#: the runner's own files (``runner.py`` before D380 split it)
_RUNNER_FILES = frozenset(os.path.join(os.path.dirname(os.path.abspath(__file__)), f) for f in (
    "runner.py", "selection.py", "judge.py", "workers.py", "results.py"))


def _where(e: BaseException, origin: Any = None) -> str:
    """Where an exception came from: the innermost frame in ``origin``'s file (the backend's
    class: its own line, issue 22), else the innermost frame outside the standard library
    and installed packages; plus the innermost frame, where the exception was raised, when
    that is elsewhere (``interpreter.py:1515`` alone named no line of the backend)."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""
    inner = tb[-1]
    own_file = None
    if origin is not None:
        with contextlib.suppress(TypeError, OSError):
            own_file = os.path.abspath(inspect.getsourcefile(type(origin)) or "")
    own = next((f for f in reversed(tb) if own_file and os.path.abspath(f.filename) == own_file),
               None) or next((f for f in reversed(tb) if not _library_file(f.filename)), None)
    if own is None or own is inner:
        return f" ({os.path.basename(inner.filename)}:{inner.lineno})"
    return (f" (at {os.path.basename(own.filename)}:{own.lineno} in {own.name}; raised in "
            f"{os.path.basename(inner.filename)}:{inner.lineno})")


def _text(e: BaseException) -> str:
    """``str(e)``, or a placeholder when the exception's own ``__str__`` raises (a backend's
    unprintable exception is still that backend's error, never the harness's)."""
    try:
        return str(e)
    except BaseException as inner:
        try:
            name = type(inner).__name__
        except BaseException:
            name = "an exception"
        return f"<unprintable {type(e).__name__}: its __str__ raised {name}>"


def _raised(what: str, e: BaseException, origin: Any = None) -> str:
    return _short(f"{what} raised {type(e).__name__}: {_text(e)}{_where(e, origin)}")


def _copy(x: Any) -> Any:
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else copy.deepcopy(x)


def _seed_rngs(seed: int, case_id: str) -> None:
    s = _derive(seed, case_id)
    random.seed(s)
    np.random.seed(s)


def _ops_dtypes(case: Case, req: Any) -> tuple[list[str], list[str]]:
    # kind-level names where the op has kinds, class names otherwise; a case's own op list
    # (the ops it tests) names classes, each expanded to the kinds the program uses, so a
    # report counts ``Binary.add`` once, never beside a bare ``Binary``
    kinds: dict[str, list[str]] = {}
    for o in sorted(req.ops):
        if "." in o:
            kinds.setdefault(o.split(".")[0], []).append(o)
    if case.ops:
        ops = list(dict.fromkeys(k for o in case.ops for k in kinds.get(o, [o])))
    else:
        ops = sorted(o for o in req.ops if "." in o or o not in kinds)
    dts = list(case.dtypes) if case.dtypes else sorted(d.value for d in req.dtypes)
    return ops, dts


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not np.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def _output_detail(o: Any) -> dict:
    return {"output": o.output, "contract": o.contract, "mismatches": o.mismatches,
            "total": o.total, "worst_index": list(o.worst_index or ()),
            "expected": o.expected, "observed": o.observed, "expected_hex": o.expected_hex,
            "observed_hex": o.observed_hex, "ulp_distance": _jsonable(o.ulp_distance),
            "detail": o.detail,
            "classes": [{"class": c[0], "count": c[1], "index": list(c[2]),
                         "expected_hex": c[3], "observed_hex": c[4], "expected": c[5],
                         "observed": c[6]} for c in getattr(o, "classes", ())],
            **({"diagnosis": o.diagnosis.to_json()} if getattr(o, "diagnosis", None) else {})}


def _diagnosed(module: Any, entry: str, inputs: list, observed: Any, v: Any) -> Any:
    """The FAIL verdict with its conformance-level diagnosis (``oracle/diagnose.py``); a
    diagnosis that cannot be computed leaves the strict verdict as it is."""
    from tilefoundry.oracle.diagnose import diagnose

    if os.environ.get("TILEFOUNDRY_DIAGNOSE", "1") == "0":  # measuring its cost
        return v
    try:
        return diagnose(module, entry, inputs, observed, v)
    except Exception:
        return v


def _tolerance(verdict: Any, observed: Any, ulp: int) -> tuple[bool, float]:
    """Whether every FAIL output of ``verdict`` is a float output within ``ulp`` of the
    reference (see manifest.py), and the worst distance."""
    from tilefoundry.oracle.compare import as_outputs as _as_outputs
    from tilefoundry.oracle.compare import gather_outputs as _gather
    from tilefoundry.oracle.compare import ulp_distance
    from tilefoundry.semantics.formats import dtype_of

    exp = [_gather(x) for x in _as_outputs(verdict.reference.value)]
    obs = [_gather(x) for x in _as_outputs(observed)]
    worst = 0.0
    for ov in verdict.outputs:
        if ov.status != "FAIL":
            continue
        e, o = exp[ov.output], np.asarray(obs[ov.output])
        if not dtype_of(e).is_float:
            return False, float("inf")
        d = ulp_distance(e, o)
        m = float(d.max()) if d.size else 0.0
        worst = max(worst, m)
        if m > ulp:
            return False, worst
    return True, worst


def _expected_mismatch(case: Case, e: BaseException | None) -> str:
    """The harness message for a reference evaluation that does not do what the case says: an
    unexpected raise, or (an expected-error case) values or another error — a catalog error."""
    if case.expect_error is None:
        return _raised("the reference evaluation", e)
    if e is None:
        return (f"the case expects the run-time check {case.expect_error!r} to fail, but the "
                f"reference evaluation returned values (an error of the catalog)")
    got = reference_check(e)
    return _raised(f"the case expects the run-time check {case.expect_error!r} to fail; the "
                   f"reference evaluation", e) + \
        (f" (the run-time check {got!r})" if got else "") + " (an error of the catalog)"


def _reported_check(case: Case, e: RunTimeCheckError, ref_error: BaseException | None
                    ) -> tuple[str, str]:
    """The verdict of a backend that raised ``RunTimeCheckError`` (backend.py's protocol)."""
    named = f"RunTimeCheckError({e.check!r})" if e.check else "RunTimeCheckError"
    if ref_error is None:
        return "FAIL", _short(f"backend.run raised {named}: {_text(e)}; the reference evaluates this "
                              f"case without failing any run-time check")
    if e.check is not None and e.check != case.expect_error:
        return "FAIL", _short(f"backend.run reported the run-time check {e.check!r}, the "
                              f"reference fails {case.expect_error!r} here ({ref_error})")
    return "PASS", _short(f"backend.run raised {named} as the reference does: {_text(e)}")


def _case_program(case: Case) -> str:
    """The program of a case whose worker died (CRASH / TIMEOUT), rebuilt in the runner."""
    try:
        return _program_text(case.build()[0])
    except Exception:
        return ""


def _program_text(module: Any) -> str:
    """The program as text for reports (the DSL source where it reads back exactly, else the
    canonical IR text), at most 20,000 characters."""
    try:
        from tilefoundry.conformance.report import _program_source

        text, src, _ = _program_source(module)
        t = src or text
    except Exception:
        return ""
    return t if len(t) <= 20000 else t[:20000] + f"\n... ({len(t) - 20000} more characters)"


def _execute(backend: Any, load_error: str, caps: Capabilities, case: Case, seed: int,
             opts: dict, phase, conn, idx: int) -> dict:
    from tilefoundry.conformance.fail_rules import fail_message
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.enclosure_eval import evaluate_enclosed

    _seed_rngs(seed, case.id)
    t0 = time.perf_counter()
    rec: dict[str, Any] = {}

    module = None

    def done(verdict: str, message: str = "", **extra: Any) -> dict:
        rec.update(verdict=verdict, message=message, seconds=time.perf_counter() - t0, **extra)
        if verdict in BAD_VERDICTS and module is not None:
            rec["program"] = _program_text(module)  # what a report shows with the failure
        return rec

    phase.value = _BUILD
    try:
        module, entry, inputs = case.build()
    except Exception as e:
        return done("ERROR", "harness: " + _raised("building the case", e), harness=True)
    phase.value = _REQ
    try:
        req = requirements(module)
    except Exception as e:
        return done("ERROR", "harness: " + _raised("type-checking the case's program", e),
                    harness=True)
    rec["ops"], rec["dtypes"] = _ops_dtypes(case, req)
    conn.send(("meta", idx, {"ops": rec["ops"], "dtypes": rec["dtypes"]}))  # for a CRASH
    why = unsupported_reason(caps, req)
    if why:
        return done("NOT_SUPPORTED", why)
    if backend is None:
        return done("ERROR", load_error)
    phase.value = _REF
    if case.expect_error is not None:
        rec["expect_error"] = case.expect_error
    ref_error: BaseException | None = None
    try:  # judged: under the backend's declared reduction order (reduction_orders.py)
        judged = judged_module(caps, module)
        if judged is not module:
            rec["judged_order"] = caps.reduction_order
        ev, _ = evaluate_enclosed(judged, entry, inputs)
    except Exception as e:
        if case.expect_error is None or reference_check(e) != case.expect_error:
            return done("ERROR", "harness: " + _expected_mismatch(case, e), harness=True)
        ref_error = e
    else:
        if case.expect_error is not None:
            return done("ERROR", "harness: " + _expected_mismatch(case, None), harness=True)
    phase.value = _COMPILE
    try:
        compiled = compile_for(backend, module, entry, inputs)  # input_specs: protocol.py
    except BackendUnsupportedError as e:
        return done("NOT_SUPPORTED", f"backend.compile: {_text(e)}")
    except Exception as e:
        return done("ERROR", _raised("backend.compile", e, backend))
    phase.value = _RUN
    try:
        observed = backend.run(compiled, [_copy(x) for x in inputs])
    except BackendUnsupportedError as e:
        return done("NOT_SUPPORTED", f"backend.run: {_text(e)}")
    except RunTimeCheckError as e:
        return done(*_reported_check(case, e, ref_error))
    except Exception as e:
        if ref_error is not None:  # D202: an exception other than the protocol's is an ERROR
            return done("ERROR", _raised("backend.run", e, backend) + f"; the reference fails the "
                        f"run-time check {case.expect_error!r} here, which a backend reports "
                        f"by raising tilefoundry.errors.RunTimeCheckError")
        return done("ERROR", _raised("backend.run", e, backend))
    if ref_error is not None:
        return done("FAIL", _short(f"the reference raises the run-time check "
                                   f"{case.expect_error!r} here ({ref_error}); the backend "
                                   f"returned values instead of raising RunTimeCheckError"))
    phase.value = _CHECK
    try:
        v = check(judged, entry, inputs, observed, reference=ev)
    except Exception as e:  # malformed output that slipped through the oracle's validation
        return done("ERROR", _raised("judging the backend's output", e))
    if v.status == "ERROR":
        return done("ERROR", "malformed output: " + v.message)
    rec["elements"] = sum(o.total for o in v.outputs)
    rec["unjudged"] = sum(o.unjudged for o in v.outputs)
    rec["methods"] = sorted({o.contract.split("(")[0].split(" ")[0] for o in v.outputs})
    if v.status == "PASS":
        return done("PASS")
    if v.status == "UNJUDGED":  # nothing rejected, but not everything could be judged
        unj = [o for o in v.outputs if o.status == "UNJUDGED"]
        return done("UNJUDGED", f"{rec['unjudged']} of {rec['elements']} element(s) unjudged "
                                f"in {len(unj)} output(s): {unj[0].line()}")
    v = _diagnosed(judged, entry, inputs, observed, v)
    fails = [o for o in v.outputs if o.status == "FAIL"]
    if v.diagnosis is not None:
        rec["diagnosis"] = v.diagnosis.to_json()
    admit = opts.get("admit")
    if admit:
        from tilefoundry.oracle.diagnose import judge_under

        try:
            under = judge_under(judged, entry, inputs, observed, v, admit)
        except Exception:
            under = False
        if under:
            return done("ADMITTED", f"admitted under the declared {admit.spelled()}; strictly: "
                                    + fails[0].line(), admitted=admit.spelled(),
                        outputs=[_output_detail(o) for o in fails])
    tol = opts.get("tolerance")
    if tol is not None:
        ok, worst = _tolerance(v, observed, tol[0])
        if ok:
            return done("PASS", f"accepted by the manifest's tolerance override (<= {tol[0]} "
                                f"ulp; worst {worst:g} ulp): {tol[1]}", tolerance=tol[0])
    why = f"; {v.diagnosis.line()}" if v.diagnosis is not None else ""
    if "judged_order" in rec:
        why += f" (judged as the declared reduction_order {rec['judged_order']!r})"
    done("FAIL", fail_message(v, fails) + why,
         outputs=[_output_detail(o) for o in fails])
    repro = opts.get("repro")
    if repro:
        phase.value = _REPRO
        try:
            _write_repro(Path(repro), case, seed, opts, module, entry, inputs, v, observed)
            rec["repro"] = Path(repro).name
        except Exception as e:
            rec["repro_error"] = _raised("writing the reproducer", e)
        if opts.get("reduce_s", 0) > 0 and "repro" in rec:
            conn.send(("partial", idx, dict(rec), float(opts["reduce_s"]) + 10.0))
            phase.value = _REDUCE
            _reduce_into(Path(repro) / "reduced", backend, case, seed, opts, module, entry,
                         inputs)
    return rec


def _write_repro(path: Path, case: Case, seed: int, opts: dict, module: Any, entry: str,
                 inputs: list, verdict: Any, observed: Any) -> None:
    from tilefoundry.conformance.report import write_reproducer

    write_reproducer(path, case_id=case.id, family=case.family, seed=seed,
                     backend=opts["backend"], catalog=opts.get("catalog"), module=module,
                     entry=entry, inputs=inputs, verdict=verdict, observed=observed)


def _reduce_into(path: Path, backend: Any, case: Case, seed: int, opts: dict, module: Any,
                 entry: str, inputs: list) -> None:
    """Shrink the failing program with the oracle's reducer (the backend re-run on each
    candidate) and write a second reproducer for the result."""
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.reduce import reduce_failure

    def still_fails(m: Any, e: str, ins: list) -> bool:
        try:
            out = backend.run(compile_for(backend, m, e, ins), [_copy(x) for x in ins])
            return check(m, e, ins, out).status == "FAIL"
        except Exception:
            return False

    try:
        r = reduce_failure(module, entry, inputs, still_fails, budget_s=float(opts["reduce_s"]))
        ins = list(r.inputs)
        out = backend.run(compile_for(backend, r.module, r.entry, ins), [_copy(x) for x in ins])
        v = check(r.module, r.entry, ins, out)
        if v.status != "FAIL":
            return
        _write_repro(path, case, seed, opts, r.module, r.entry, ins, v, out)
        (path / "reduction.txt").write_text(
            f"reduced in {r.seconds:.1f} s with {r.checks} checks; {r.op_count} op(s) left\n"
            + "".join(f"  {s}\n" for s in r.steps))
    except Exception as e:
        path.mkdir(parents=True, exist_ok=True)
        (path / "reduction.txt").write_text(_raised("the reducer", e) + "\n")
