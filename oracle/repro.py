"""The reproducer writer: a self-contained directory per failure.

``write_repro(directory, module, entry, inputs, verdict, candidate=...)`` writes::

    program.py      the program as DSL source (``semantics.dsl.to_source``) when the DSL is
                    available, else the canonical text (``semantics.printer.to_text``), for reading
    program.pkl     the Module itself (pickle), what ``repro.py`` loads
    inputs/NN.npy   each input's raw bits (an unsigned-int view for floats: .npy has no bf16 /
                    fp8 types; meta.json records each IR dtype)
    inputs.hex.txt  every input element as a hex bit pattern and its decimal value
    expected/NN.npy the reference outputs;  observed/NN.npy  the candidate's outputs
    verdict.txt     the verdict summary: contract, mismatch count, worst element in hex/decimal
    repro.py        standalone: ``python repro.py [CANDIDATE]`` re-runs the comparison with
                    only tilefoundry and the candidate installed; exit 1 on FAIL / ERROR

``CANDIDATE`` is ``package.module:attr`` naming either a callable ``(module, entry, inputs) ->
outputs`` or a backend factory (an object with ``compile`` / ``run``); the one recorded at write
time is the default.
"""

from __future__ import annotations

import importlib
import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.formats import FORMATS, dtype_of
from tilefoundry.semantics.ir import Module

__all__ = ["load_candidate", "load_repro", "rerun", "write_repro"]

_REPRO_PY = '''"""Standalone reproducer written by tilefoundry (oracle/repro.py).

Run:  python repro.py [package.module:candidate]
"""
import sys
from pathlib import Path

from tilefoundry.oracle.repro import rerun

if __name__ == "__main__":
    sys.exit(rerun(Path(__file__).resolve().parent, sys.argv[1] if len(sys.argv) > 1 else None))
'''


def _source(module: Module) -> str:
    try:
        from tilefoundry.semantics.dsl import to_source  # type: ignore[attr-defined]

        return to_source(module)
    except Exception:  # the DSL is optional here; the canonical text always exists
        from tilefoundry.semantics.printer import to_text

        return "# canonical HIR text (tilefoundry.semantics.printer.to_text)\n" + \
            "\n".join(f"# {line}" for line in to_text(module).splitlines()) + "\n"


def _hex_lines(name: str, x: np.ndarray) -> list[str]:
    dt = dtype_of(x)
    width = max(1, FORMATS[dt].bits // 4)
    bits = to_bits(np.asarray(x).reshape(-1)) if dt.value != "bool" else \
        np.asarray(x).reshape(-1).astype(np.uint8)
    vals = np.asarray(x).reshape(-1)
    out = [f"# {name}: dtype {dt.value}, shape {tuple(np.shape(x))}"]
    for i, (b, v) in enumerate(zip(bits, vals, strict=True)):
        dec = float(np.asarray(v).astype(np.float64)) if dt.is_float else v.item()
        out.append(f"{name}[{i}] = 0x{int(b):0{width}x}  {dec!r}")
    return out


def _plain(v: Any) -> Any:
    return unshard(v) if isinstance(v, Sharded) else v


def _save(path: Path, x: np.ndarray) -> str:
    """Save the raw bits (an unsigned view; ``.npy`` has no bf16 / fp8 types); returns the IR
    dtype name needed to read them back."""
    x = np.asarray(x)
    dt = dtype_of(x)
    np.save(path, to_bits(x) if dt.is_float else x, allow_pickle=False)
    return dt.value


def _load(path: Path, dtype: str) -> np.ndarray:
    from tilefoundry.semantics.dtypes import from_bits
    from tilefoundry.semantics.formats import DType

    raw = np.load(path, allow_pickle=False)
    dt = DType.parse(dtype)
    return from_bits(raw, dt) if dt.is_float else raw


def write_repro(directory: str | Path, module: Module, entry: str, inputs: Sequence[Any],
                verdict: Any, *, candidate: str | None = None, observed: Any = None) -> Path:
    """Write the reproducer directory (see the module docstring); returns its path."""
    d = Path(directory)
    (d / "inputs").mkdir(parents=True, exist_ok=True)
    (d / "expected").mkdir(exist_ok=True)
    (d / "observed").mkdir(exist_ok=True)
    (d / "program.py").write_text(_source(module))
    with open(d / "program.pkl", "wb") as f:
        pickle.dump({"module": module, "entry": entry}, f)
    hex_lines: list[str] = []
    dtypes = []
    for i, x in enumerate(inputs):
        dtypes.append(_save(d / "inputs" / f"{i:02d}.npy", _plain(x)))
        hex_lines += _hex_lines(f"input{i}", np.asarray(_plain(x)))
    (d / "inputs.hex.txt").write_text("\n".join(hex_lines) + "\n")
    ref = getattr(verdict, "reference", None)
    if ref is not None:
        exp = ref.value if isinstance(ref.value, tuple) else (ref.value,)
        for i, x in enumerate(exp):
            _save(d / "expected" / f"{i:02d}.npy", _plain(x))
    if observed is not None:
        obs = observed if isinstance(observed, tuple | list) else (observed,)
        for i, x in enumerate(obs):
            if isinstance(_plain(x), np.ndarray):
                try:
                    _save(d / "observed" / f"{i:02d}.npy", _plain(x))
                except Exception:  # a malformed candidate output is recorded as text only
                    (d / "observed" / f"{i:02d}.txt").write_text(repr(x))
    (d / "verdict.txt").write_text((verdict.summary() if hasattr(verdict, "summary")
                                    else str(verdict)) + "\n")
    (d / "meta.json").write_text(json.dumps({"entry": entry, "candidate": candidate,
                                             "n_inputs": len(inputs), "dtypes": dtypes},
                                            indent=1))
    (d / "repro.py").write_text(_REPRO_PY)
    return d


def load_repro(directory: str | Path) -> tuple[Module, str, list[np.ndarray], dict]:
    d = Path(directory)
    with open(d / "program.pkl", "rb") as f:
        prog = pickle.load(f)
    meta = json.loads((d / "meta.json").read_text())
    inputs = [_load(d / "inputs" / f"{i:02d}.npy", meta["dtypes"][i])
              for i in range(meta["n_inputs"])]
    return prog["module"], prog["entry"], inputs, meta


def load_candidate(spec: str):
    """``package.module:attr`` → a callable ``(module, entry, inputs) -> outputs``."""
    from tilefoundry.errors import InvalidArgumentError

    mod_name, _, attr = spec.partition(":")
    if not attr:
        raise InvalidArgumentError(f"candidate {spec!r}: expected 'package.module:attr'")
    obj = getattr(importlib.import_module(mod_name), attr)
    if isinstance(obj, type) or (callable(obj) and not _is_candidate_callable(obj)):
        obj = obj()
    if hasattr(obj, "compile") and hasattr(obj, "run"):
        backend = obj
        return lambda m, e, xs: backend.run(backend.compile(m, e), xs)
    return obj


def _is_candidate_callable(obj: Any) -> bool:
    import inspect

    try:
        return len(inspect.signature(obj).parameters) == 3
    except (TypeError, ValueError):
        return False


def rerun(directory: str | Path, candidate: str | None = None) -> int:
    """Re-run the comparison recorded in ``directory``; prints the verdict, returns 0 on PASS."""
    from tilefoundry.oracle.compare import PASS, check_candidate

    module, entry, inputs, meta = load_repro(directory)
    spec = candidate or meta.get("candidate")
    if not spec:
        print("no candidate recorded; pass one: python repro.py package.module:candidate")
        return 2
    v = check_candidate(module, entry, inputs, load_candidate(spec))
    print(v.summary())
    return 0 if v.status == PASS else 1
