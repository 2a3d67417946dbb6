"""Malformed-input fuzz of every place a user hands tilefoundry data (issue 34, item 6).
Over 800 lines: one generator of hostile inputs per file kind and entry point, written
here on purpose (sharing nothing with the project's own fuzzers).

    python benchmarks/malformed_inputs.py [N] [--seed S] [--jobs J] [--only CAT,...]

Its generators share nothing with the project's ``fuzz_ir``: hand-rolled hostile structures
and bytes, built from a few valid templates by mutations written here. Categories:

* the file kinds, each read through its public path — ``results`` (``conformance merge``
  with --junit / --html / --coverage, ``diff``, ``--resume``'s reader), ``manifest``,
  ``baseline``, ``capabilities``, ``reproducer`` (a tampered folder replayed by ``repro.py``'s
  logic, --recorded and --backend reference), ``fuzz_db`` (the saved seeds of a fuzz run):
  deep nesting, 5,000-digit integers, a wrong type at each key, keys missing / unknown /
  twice, non-UTF-8 bytes, truncation, NaN / Infinity tokens, BOMs, and in place of the file a
  FIFO, a directory, a socket, a symlink to /dev/zero or /dev/null, a sparse file past the
  size limit;
* ``dsl``: DSL source mutated token by token and hostile operators (``%``, ``**``, ``<<``,
  huge literals, deep parentheses, long chains), through ``parse_module``, ``to_source``,
  ``infer_module``, ``hash``;
* ``ir``: IR nodes rebuilt with a hostile value in a field (``dataclasses.replace``: the
  constructors' checks) and deep chains, through ``hash``, ``to_text``, ``infer_module``;
* ``api``: the public entry points (``evaluate``, ``compile`` and a compiled program,
  ``to_bits`` / ``from_bits``, ``use_limits``, ``Sharded``, ``RunTimeCheckError``, ``check``,
  ``DType.parse``, ``module``, ``parse_module``, ``to_source``, ``Capabilities.from_json``,
  ``Manifest.parse``, ``Baseline.parse``) with one argument replaced by a value of a wrong
  type.

Each input is classified: ``ok``, ``project`` (a ``TilefoundryError``, or the CLI's exit 2),
``bug`` (any other exception) or ``slow`` (more than ``SLOW_S`` = 10 s; ``signal.setitimer``
stops it). Workers run under an address-space limit (``MEM_MB``), so an unbounded allocation
shows up as a ``MemoryError`` bug instead of taking the machine. Input ``i`` of a category
is drawn from ``random.Random(f"{seed}:{category}:{i}")``: the same seed, the same inputs.
Prints the per-category mix, the totals, each distinct bug (category, exception, where) with
an example, and the seconds it took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import random
import resource
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

CATEGORIES = ("results", "manifest", "baseline", "capabilities", "reproducer", "fuzz_db",
              "dsl", "ir", "api")
SLOW_S = 10.0
MEM_MB = 3072


class Slow(BaseException):
    """Raised by the interval timer when one input runs past ``SLOW_S``."""


# =============================================================================================
# hostile values and byte mutations (hand-rolled; nothing from the project's generators)
# =============================================================================================
HOSTILE = [None, True, False, 0, -1, 1.5, -0.0, 1e308, "", "x", "<script>alert(1)</script>",
           "\u202e\u0000", "A" * 5000, [], {}, [1, [2, [3]]], {"a": {"b": {}}}, [None, None],
           10 ** 30, -(10 ** 19), 2 ** 64, ["x", 1], [[1], [1, 2]], {"": ""}, "NaN"]


def hostile(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.08:
        return rng.choice([float("nan"), float("inf"), float("-inf")])
    if r < 0.14:
        v: Any = rng.choice([0, "x", None])
        for _ in range(rng.choice([5, 40, 200])):
            v = [v] if rng.random() < 0.5 else {"k": v}
        return v
    return rng.choice(HOSTILE)


_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"9" * 5000, b"-" + b"7" * 4400,
           b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\\ud800", b'"\\ud800"',
           b"[" * 100_000, b"{" * 5000, b'"', b"\\", b"}", b"]", b",", b":", b"\n", b"\r\n",
           b"true", b"null", b"\"a\": 1, \"a\": 2", b"'", b"\t" * 1000]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level mutation of ``data``: truncate, insert a hostile token, flip bytes, add a
    BOM, wrap in deep nesting, or replace it."""
    k = rng.randrange(9)
    pos = rng.randrange(len(data) + 1)
    if k == 0:
        return data[:pos]
    if k == 1:
        return data[:pos] + rng.choice(_TOKENS) + data[pos:]
    if k == 2:
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if k == 3:
        return rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff"]) + data
    if k == 4:
        d = rng.choice([33, 200, 1200, 50_000])
        return b"[" * d + data + b"]" * d
    if k == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    if k == 6:
        return b""
    if k == 7:  # a number replaced
        import re

        nums = list(re.finditer(rb"-?\d+(\.\d+)?", data))
        if nums:
            m = rng.choice(nums)
            return data[:m.start()] + rng.choice(_TOKENS[:6]) + data[m.end():]
        return data + rng.choice(_TOKENS)
    return data * rng.choice([2, 3])


def mutate_tree(obj: Any, rng: random.Random) -> Any:
    """``obj`` (JSON-like) with one place changed: a value replaced by a hostile one, a key
    removed, an unknown key added, a list emptied or made huge."""
    obj = json.loads(json.dumps(obj))
    places: list[tuple[Any, Any]] = []
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            places += [(x, k) for k in x]
            stack += list(x.values())
        elif isinstance(x, list):
            places += [(x, i) for i in range(len(x))]
            stack += x
    if not places:
        return hostile(rng)
    parent, key = rng.choice(places)
    k = rng.randrange(5)
    if k == 0 and isinstance(parent, dict):
        del parent[key]
    elif k == 1 and isinstance(parent, dict):
        parent[rng.choice(["extra", "__proto__", "", "type", "id"])] = hostile(rng)
    elif k == 2 and isinstance(parent[key], list):
        parent[key] = parent[key] * rng.choice([0, 50])
    else:
        parent[key] = hostile(rng)
    return obj


def dump(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def special_file(path: Path, rng: random.Random) -> str:
    """Put something that is no regular file (or an absurd one) at ``path``; its name."""
    k = rng.randrange(8)
    if k == 0:
        os.mkfifo(path)
        return "fifo"
    if k == 1:
        os.symlink("/dev/zero", path)
        return "symlink to /dev/zero"
    if k == 2:
        os.symlink("/dev/null", path)
        return "symlink to /dev/null"
    if k == 3:
        path.mkdir()
        return "directory"
    if k == 4:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(path))
        except OSError:  # path too long for a socket: a dangling symlink instead
            os.symlink(path.with_name("nowhere"), path)
        finally:
            s.close()
        return "socket"
    if k == 5:
        with open(path, "wb") as f:
            f.truncate(4 * 2**30)  # sparse: past every kind's limit
        return "sparse 4 GiB"
    if k == 6:
        os.symlink(path, path)  # a loop
        return "symlink loop"
    return "missing"


# =============================================================================================
# valid templates
# =============================================================================================
def _case(i: int, verdict: str) -> dict:
    r = {"type": "case", "id": f"spec/binary/add/f32/{i}", "family": "binary",
         "verdict": verdict, "seconds": 0.01, "message": f"{verdict}: worst element",
         "ops": ["Add"], "dtypes": ["f32"], "elements": 16, "unjudged": 0}
    if verdict in ("FAIL", "ADMITTED"):
        r["outputs"] = [{"output": 0, "contract": "ulp<=0", "mismatches": 3, "total": 16,
                         "worst_index": [2], "expected": 1.0, "observed": 2.0,
                         "classes": [{"class": "rounding", "count": 3, "index": [2],
                                      "expected": 1.0, "observed": 2.0,
                                      "expected_hex": "0x3f800000",
                                      "observed_hex": "0x40000000"}],
                         "diagnosis": {"least": [["nsz"]], "none": False, "classes": []}}]
        r["repro"] = f"case_{i}"
        r["diagnosis"] = {"least": [["nsz", "afn"]], "none": False}
    if verdict == "XFAIL":
        r.update(raw_verdict="FAIL", manifest="xfail: tracked")
    r["warnings"] = [{"phase": "run", "category": "RuntimeWarning", "where": "x.py:3",
                      "message": "overflow in cast", "count": 2}]
    r["attempts"] = ["FAIL", "PASS"] if verdict == "FLAKY" else None
    return r


def results_template() -> list[dict]:
    head = {"type": "run", "backend": "reference", "seed": 0, "format": 1,
            "capabilities": {"ops": None}, "contracts": "1", "shard": None}
    verdicts = ["PASS", "FAIL", "ADMITTED", "XFAIL", "FLAKY", "ERROR", "NOT_SUPPORTED"]
    return [head, *(_case(i, v) for i, v in enumerate(verdicts)),
            {"type": "summary", "cases": 7, "counts": {}, "exit_code": 1, "shard": None}]


MANIFEST = b'''[[xfail]]
case = "spec/binary/add/f32/*"
reason = "tracked"
verdict = ["FAIL"]

[[skip]]
case = "spec/unary/*"
reason = "slow"

[[tolerance]]
case = "spec/cast/*"
reason = "rounds"
ulp = 2

[[admit]]
case = "spec/reduce/*"
reason = "reassociates"
relaxations = ["nsz", "afn@Silu"]
'''


def baseline_template() -> dict:
    return {"format": 1, "backend": "reference",
            "failures": [{"case": "spec/binary/add/f32/1", "verdict": "FAIL",
                          "reason": "rounds by truncation"},
                         {"case": "spec/binary/add/f32/5", "verdict": "ERROR", "reason": "x"}]}


def caps_template() -> dict:
    from tilefoundry.conformance.backend import Capabilities

    return Capabilities.everything(mesh=True, mesh_shapes=frozenset({(2,)})).to_json()


DSL_SOURCES = ['''N = DimVar("N", 1, 65)

@func
def f(x: Tensor[(N,), f32], y: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    c = x + y
    return c * c - 0.5 * c
''', '''@func
def g(x: Tensor[(4, 8), bf16]) -> Tensor[(4,), f32]:
    y = cast(x, f32)
    return reduce_sum(y, axis=1)
''', '''K = 3

@func
def h(x: Tensor[(8,), i32]) -> Tensor[(8,), i32]:
    return x * (K + 1) + (x >> 1)
''']

DSL_HOSTILE = ["'%0*d' % (2**31 - 1, 1)", "2 ** 2 ** 2 ** 30", "1 << (1 << 40)", "(" * 5000,
               "9" * 5000, "'a' * (2 ** 40)", "[0] * (2 ** 40)", "x" + " + x" * 5000,
               "-" * 10000 + "1", "lambda: 0", "__import__('os')", "open('/etc/passwd')",
               "\x00", "\udcff", "\u202e", "'''", '"""', "\\", "@", "yield", "await x",
               "f'{x}'", "{**x}", "x[::-1]", "x[" + "0," * 3000 + "]", "not " * 3000 + "x",
               "1e999", "float('nan')", "0x" + "f" * 5000, "x if x else x", "~" * 4000 + "x"]


def dsl_text(rng: random.Random) -> str:
    """A DSL source: a valid one mutated by tokens, or one hostile expression placed in it."""
    src = rng.choice(DSL_SOURCES)
    k = rng.randrange(4)
    if k == 0:  # a hostile expression where an expression is
        lines = src.splitlines()
        i = max(j for j, ln in enumerate(lines) if ln.strip().startswith("return"))
        lines[i] = "    return " + rng.choice(DSL_HOSTILE)
        return "\n".join(lines) + "\n"
    if k == 1:  # a hostile module-level constant used by the body
        return src.replace("@func", f"K2 = {rng.choice(DSL_HOSTILE)}\n\n@func", 1)
    if k == 2:  # token-level: delete / duplicate / swap words
        words = src.split(" ")
        for _ in range(rng.randint(1, 3)):
            j = rng.randrange(len(words))
            op = rng.randrange(3)
            if op == 0:
                del words[j]
            elif op == 1:
                words.insert(j, words[j])
            else:
                words[j] = rng.choice([*DSL_HOSTILE, "f64", "Tensor", "func", "DimVar", "("])
        return " ".join(words)
    return mutate_bytes(src.encode(), rng).decode("utf-8", "surrogateescape")


# =============================================================================================
# per-category inputs: each returns a thunk that makes the calls a user's input reaches
# =============================================================================================
def _cli(argv: list[str]) -> int:
    from tilefoundry.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            return main(argv)
        except SystemExit as e:  # argparse: usage line, exit 2
            return int(e.code or 0)


def _file(work: Path, name: str, rng: random.Random, valid: bytes, tree: Any) -> tuple[Path, str]:
    p = work / name
    r = rng.random()
    if r < 0.15:
        return p, special_file(p, rng)
    if r < 0.55 and tree is not None:
        data, how = dump(mutate_tree(tree, rng)), "tree"
        if rng.random() < 0.3:
            data, how = mutate_bytes(data, rng), "tree+bytes"
    else:
        data, how = mutate_bytes(valid, rng), "bytes"
    p.write_bytes(data)
    return p, how


def in_results(rng: random.Random, work: Path):
    lines = results_template()
    r = rng.random()
    if r < 0.15:
        p, how = _file(work, "r.jsonl", rng, b"", None)
    else:
        raw = [dump(x) for x in lines]
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(raw))
            if rng.random() < 0.6:
                raw[i] = dump(mutate_tree(lines[i], rng))
            else:
                raw[i] = mutate_bytes(raw[i], rng)
        if rng.random() < 0.1:
            rng.shuffle(raw)
        p = work / "r.jsonl"
        p.write_bytes(b"\n".join(raw) + (b"\n" if rng.random() < 0.8 else b""))
        how = "lines"

    def run() -> Any:
        from tilefoundry.conformance.results import _read_resume

        out = work / "out"
        out.mkdir(exist_ok=True)
        codes = [_cli(["conformance", "merge", str(p), "-o", str(out / "m.jsonl"), "--junit",
                       str(out / "j.xml"), "--html", str(out / "h.html"), "--coverage",
                       str(out / "c.txt")]),
                 _cli(["conformance", "diff", str(p), str(p)])]
        if p.is_file() and not p.is_symlink():
            with contextlib.redirect_stderr(io.StringIO()):
                _read_resume(p, "reference", 0)
        return codes
    return run, how


def in_manifest(rng: random.Random, work: Path):
    import tomllib

    p, how = _file(work, "m.toml", rng, MANIFEST, tomllib.loads(MANIFEST.decode())
                   if rng.random() < 0.0 else None)
    if how == "bytes" and rng.random() < 0.4:  # a TOML-level change: a value of a wrong type
        lines = MANIFEST.decode().splitlines()
        i = rng.choice([j for j, ln in enumerate(lines) if "=" in ln])
        key = lines[i].split("=")[0]
        val = rng.choice(["1", "true", "[]", "{}", "[[1]]", "1.5", "nan", "inf", "9" * 5000,
                          "1979-05-27", "{a = {b = {}}}", "[" * 3000 + "]" * 3000, '"\\u0000"',
                          "'''x'''", '"' + "a" * 100000 + '"'])
        lines[i] = f"{key}= {val}"
        p.write_text("\n".join(lines) + "\n")
        how = "toml value"

    def run() -> Any:
        from tilefoundry.conformance.manifest import Manifest

        m = Manifest.load(p)
        for cid in ("spec/binary/add/f32/1", "spec/cast/x", "spec/reduce/y"):
            m.skip_for(cid), m.xfail_for(cid), m.tolerance_for(cid), m.admit_for(cid)
        return m.unused(["a"])
    return run, how


def in_baseline(rng: random.Random, work: Path):
    t = baseline_template()
    p, how = _file(work, "b.json", rng, dump(t), t)

    def run() -> Any:
        from tilefoundry.conformance.campaign import Baseline

        b = Baseline.load(p)
        b.check_ids([c["id"] for c in results_template()[1:-1]] + ["spec/binary/add/f32/1",
                                                                   "spec/binary/add/f32/5"])
        return b.apply(results_template()[1:-1]).to_json()
    return run, how


def in_capabilities(rng: random.Random, work: Path):
    t = caps_template()
    p, how = _file(work, "c.json", rng, dump(t), t)

    def run() -> Any:
        from tilefoundry.conformance.backend import Capabilities
        from tilefoundry.conformance.selection import validate_capabilities

        return validate_capabilities(Capabilities.load(str(p)), "--capabilities")
    return run, how


_REPRO: dict[str, Path] = {}


def _valid_reproducer(root: Path) -> Path:
    """A reproducer folder of a FAIL (written once per worker)."""
    if "dir" in _REPRO:
        return _REPRO["dir"]
    from tilefoundry.conformance.report import write_reproducer
    from tilefoundry.oracle.compare import check
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module(DSL_SOURCES[0])
    x = np.arange(4, dtype=np.float32)
    observed = x * 3
    v = check(m, "f", [x, x], observed)
    d = write_reproducer(root / "valid_repro", case_id="oracle/f", family="oracle", seed=0,
                         backend="reference", module=m, entry="f", inputs=[x, x], verdict=v,
                         observed=observed)
    _REPRO["dir"] = d
    return d


def in_reproducer(rng: random.Random, work: Path):
    d = work / "repro"
    shutil.copytree(_valid_reproducer(work.parent), d)
    meta = json.loads((d / "case.json").read_text())
    target = rng.choice(["case.json", "case.json", "case.json", "program_dsl.py", "input_0.npy",
                         "observed_0.npy", "pickle", "folder"])
    how = target
    if target == "case.json":
        (d / "case.json").unlink()
        _file(d, "case.json", rng, dump(meta), meta)
    elif target == "program_dsl.py":
        (d / target).unlink()
        if rng.random() < 0.2:
            special_file(d / target, rng)
        else:
            (d / target).write_text(dsl_text(rng), errors="surrogateescape")
    elif target in ("input_0.npy", "observed_0.npy"):
        raw = (d / target).read_bytes()
        (d / target).unlink()
        if rng.random() < 0.25:
            special_file(d / target, rng)
        else:
            k = rng.randrange(3)
            if k == 0:
                raw = mutate_bytes(raw, rng)
            elif k == 1:  # a valid .npy of another dtype / shape / an object array header
                buf = io.BytesIO()
                np.save(buf, rng.choice([np.zeros((2, 3), np.float64), np.arange(4, dtype=np.int8),
                                         np.array(5), np.zeros(10**5, np.uint32)]))
                raw = buf.getvalue()
            else:  # a pickled object array (must be refused, never unpickled)
                buf = io.BytesIO()
                np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
                raw = buf.getvalue()
            (d / target).write_bytes(raw)
    elif target == "pickle":
        (d / "module.pkl").write_bytes(b"\x80\x04K\x01.")
    else:
        shutil.rmtree(d)
        special_file(d, rng)

    def run() -> Any:
        from tilefoundry.conformance.repro_replay import rerun

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            return [rerun(d, ["--recorded"]), rerun(d, ["--backend", "reference"])]
    return run, how


def in_fuzz_db(rng: random.Random, work: Path):
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = DirectoryBasedExampleDatabase(str(work / "db"))
    key = b"tilefoundry-fuzz\0reference\0default\0abc"
    folder = Path(db._key_path(key))
    folder.mkdir(parents=True)
    hows = []
    for j in range(rng.randint(1, 4)):
        f = folder / f"{j:016x}"
        r = rng.random()
        if r < 0.2:
            hows.append(special_file(f, rng))
        else:
            val = rng.choice([b"12345", b"9" * 5000, b"-1", b"", b"\xff\xfe", b"1e9",
                              b"18446744073709551616", b"0x10", b" 7", b"\x00", b"\xd9\xa3",
                              mutate_bytes(b"42", rng)])
            f.write_bytes(val)
            hows.append("entry")
    if rng.random() < 0.1:
        shutil.rmtree(folder)
        special_file(folder, rng)
        hows = ["folder"]

    def run() -> Any:
        from tilefoundry.conformance.loaders import fuzz_db_seeds

        warned: list[str] = []
        seeds = fuzz_db_seeds(db, key, warn=warned.append)
        assert all(0 <= s < 2**64 for s in seeds) and all("\n" not in w for w in warned)
        return seeds
    return run, "+".join(sorted(set(hows)))


def in_dsl(rng: random.Random, work: Path):
    text = dsl_text(rng)

    def run() -> Any:
        from tilefoundry.semantics.dsl import parse_module, to_source
        from tilefoundry.semantics.printer import to_text
        from tilefoundry.semantics.typeinfer.core import Session
        from tilefoundry.semantics.typeinfer.functions import infer_module

        m = parse_module(text)
        hash(m)
        to_text(m)
        to_source(m)
        return infer_module(m, Session())
    return run, "text"


def _ir_nodes(m: Any) -> list:
    from tilefoundry.semantics.ir import Expr

    out, stack, seen = [], list(m.functions), set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Expr):
            out.append(x)
            for f in dataclasses.fields(x):
                v = getattr(x, f.name)
                stack += list(v) if isinstance(v, tuple) else [v]
    return out


def in_ir(rng: random.Random, work: Path):
    from tilefoundry.semantics.dsl import parse_module
    from tilefoundry.semantics.ir import Call, Constant, Function, Module, Tuple, TupleGetItem

    src = rng.choice(DSL_SOURCES)
    m = parse_module(src)
    k = rng.random()
    how = "field"
    build: Any
    if k < 0.15:  # a deep chain of one op
        how = "chain"
        fn = m.functions[0]
        depth = rng.choice([100, 3000, 10000])

        def build():
            body = fn.body
            for _ in range(depth):
                body = Call(body.op, (body, *body.args[1:])) if isinstance(body, Call) else body
            return Module((dataclasses.replace(fn, body=body),))
    elif k < 0.3:  # a constant of a hostile value
        how = "constant"
        val = rng.choice([np.zeros((2, 2), object), np.array([[1], [1, 2]], dtype=object),
                          [[1.0], [1.0, 2.0]], "x", None, 2**100, np.float64("nan"),
                          np.zeros(0, np.float32), np.zeros((1,) * 40, np.float32),
                          np.broadcast_to(np.float32(1), (2**16, 2**16)), {}])

        def build():
            return Constant(val)
    elif k < 0.4:
        how = "tuple"

        def build():
            t = Tuple(tuple(rng.choice([None, 1, "x", m.functions[0].params[0]])
                            for _ in range(3)))
            return TupleGetItem(t, rng.choice([-1, 3, 2**70, "0", None, 1.5]))
    else:
        nodes = _ir_nodes(m)
        node = rng.choice(nodes)
        f = rng.choice(dataclasses.fields(node))
        val = rng.choice([hostile(rng), nodes[0], (), (None,), (nodes[-1],) * 3, m, Function,
                          object()])
        how = f"{type(node).__name__}.{f.name}"

        def build():
            new = dataclasses.replace(node, **{f.name: val})
            fns = tuple(new if x is node else x for x in m.functions)
            return Module(fns) if isinstance(new, Function) else new

    def run() -> Any:
        from tilefoundry.semantics.printer import to_text
        from tilefoundry.semantics.typeinfer.core import Session
        from tilefoundry.semantics.typeinfer.functions import infer_module

        x = build()
        hash(x)
        repr(x)
        if isinstance(x, Module):
            to_text(x)
            infer_module(x, Session())
        return None
    return run, how


def _api_calls() -> list[tuple[str, Any, list]]:
    """(name, function, valid arguments) of the public entry points."""
    from tilefoundry.compiler.pipeline import compile as tf_compile
    from tilefoundry.conformance.backend import Capabilities
    from tilefoundry.conformance.campaign import Baseline
    from tilefoundry.conformance.manifest import Manifest
    from tilefoundry.errors import RunTimeCheckError
    from tilefoundry.limits import use_limits
    from tilefoundry.oracle.compare import check
    from tilefoundry.semantics.dsl import module, parse_module, to_source
    from tilefoundry.semantics.dtypes import from_bits, to_bits
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.evaluator.mesh import Sharded
    from tilefoundry.semantics.formats import DType

    m = parse_module(DSL_SOURCES[0])
    x = np.arange(4, dtype=np.float32)
    comp = _API.get("compiled")
    if comp is None:
        comp = _API["compiled"] = tf_compile(m, "f", [(4,), (4,)])

    def limits(**kw: Any) -> Any:
        with use_limits(**kw):
            return None

    return [
        ("evaluate", evaluate, [m, "f", [x, x]]),
        ("compile", tf_compile, [m, "f", [(4,), (4,)], "interp"]),
        ("Compiled.__call__", comp, [[x, x]]),
        ("to_bits", to_bits, [x]),
        ("from_bits", from_bits, [np.zeros(4, np.uint32), "f32"]),
        ("use_limits", lambda name, v: limits(**({name: v} if isinstance(name, str) else
                                                 {"max_elements": name})), ["max_elements", 10]),
        ("Sharded", Sharded, [None, x]),
        ("RunTimeCheckError", RunTimeCheckError, ["m", "index_range"]),
        ("check", check, [m, "f", [x, x], x * 2]),
        ("DType.parse", DType.parse, ["f32"]),
        ("module", module, [m.functions[0]]),
        ("parse_module", parse_module, [DSL_SOURCES[0]]),
        ("to_source", to_source, [m]),
        ("Capabilities.from_json", Capabilities.from_json, [caps_template()]),
        ("Manifest.parse", Manifest.parse, [MANIFEST.decode()]),
        ("Baseline.parse", Baseline.parse, [json.dumps(baseline_template())]),
    ]


_API: dict[str, Any] = {}


def in_api(rng: random.Random, work: Path):
    calls = _API.get("calls") or _API.setdefault("calls", _api_calls())
    name, fn, args = rng.choice(calls)
    args = list(args)
    ragged = [[1.0], [1.0, 2.0]]
    pool = [None, 3, -1, 2**70, 1.5, float("nan"), "x", "", b"x", [], {}, ragged, [ragged],
            object(), np.array(ragged, dtype=object), np.zeros((2, 2)), np.zeros(3, np.int64),
            np.zeros(4, np.float32), (1, 2), [[1, -1]], [(4,)], [(2**40,)], {"a": 1},
            lambda: 0, Path("/dev/zero"), ["f"] * 3, "\x00", "f32", "nope", True]
    args[rng.randrange(len(args))] = rng.choice(pool)  # one argument of a wrong type

    def run() -> Any:
        r = fn(*args)
        if isinstance(r, Exception):
            str(r)
        return None
    return run, name


MAKERS = {"results": in_results, "manifest": in_manifest, "baseline": in_baseline,
          "capabilities": in_capabilities, "reproducer": in_reproducer, "fuzz_db": in_fuzz_db,
          "dsl": in_dsl, "ir": in_ir, "api": in_api}


# =============================================================================================
# running and classifying
# =============================================================================================
def _alarm(signum: int, frame: Any) -> None:
    raise Slow()


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    own = [f for f in tb if "tilefoundry" in f.filename or "/wt-" in f.filename
           or "site-packages" not in f.filename]
    f = (own or tb)[-1] if (own or tb) else None
    return f"{Path(f.filename).name}:{f.lineno} {f.name}" if f else "?"


def run_one(cat: str, seed: int, i: int, root: Path) -> tuple[str, int, str, str, float, str]:
    """(category, i, outcome, how, seconds, bug signature) of input ``i`` of ``cat``."""
    from tilefoundry.errors import TilefoundryError

    rng = random.Random(f"{seed}:{cat}:{i}")
    work = Path(tempfile.mkdtemp(dir=root))
    t0 = time.monotonic()
    sig = ""
    how = "?"
    signal.setitimer(signal.ITIMER_REAL, SLOW_S)
    try:
        run, how = MAKERS[cat](rng, work)
        run()
        outcome = "ok"
    except Slow:
        outcome = "slow"
        sig = f"slow {how}"
    except TilefoundryError:
        outcome = "project"
    except (Exception, RecursionError, MemoryError) as e:
        outcome = "bug"
        sig = f"{type(e).__name__} at {_where(e)}: {str(e)[:120]!r}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    dt = time.monotonic() - t0
    if dt > SLOW_S and outcome != "slow":
        outcome, sig = "slow", f"slow {how} ({dt:.1f} s)"
    shutil.rmtree(work, ignore_errors=True)
    return cat, i, outcome, how, dt, sig


def _worker_init(root: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_MB * 2**20, MEM_MB * 2**20))
    signal.signal(signal.SIGALRM, _alarm)
    os.environ.setdefault("NO_COLOR", "1")
    global _ROOT
    _ROOT = Path(root)


_ROOT = Path(tempfile.gettempdir())


def _task(t: tuple[str, int, int]) -> tuple[str, int, str, str, float, str]:
    return run_one(t[0], t[1], t[2], _ROOT)


def fuzz(n: int, seed: int = 0, jobs: int = 1, only: tuple[str, ...] = CATEGORIES
         ) -> dict[str, Any]:
    """Run ``n`` inputs spread evenly over ``only``; the counts, bugs and seconds."""
    tasks = [(c, seed, i) for i in range(-(-n // len(only))) for c in only][:n]
    root = tempfile.mkdtemp(prefix="tf-malformed-")
    t0 = time.monotonic()
    mix: Counter = Counter()
    outcomes: Counter = Counter()
    bugs: dict[str, tuple[str, int, int]] = {}
    slowest = 0.0
    try:
        if jobs > 1:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(jobs, _worker_init, (root,),
                                             maxtasksperchild=2000) as pool:
                rows = list(pool.imap_unordered(_task, tasks, chunksize=64))
        else:
            signal.signal(signal.SIGALRM, _alarm)
            rows = [run_one(c, s, i, Path(root)) for c, s, i in tasks]
        for cat, i, outcome, _how, dt, sig in rows:
            mix[cat] += 1
            outcomes[(cat, outcome)] += 1
            slowest = max(slowest, dt)
            if sig:
                prev = bugs.get(sig)
                bugs[sig] = (cat, (prev[1] if prev else 0) + 1, prev[2] if prev else i)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"inputs": len(tasks), "mix": dict(mix), "outcomes": outcomes, "bugs": bugs,
            "seconds": time.monotonic() - t0, "slowest_s": slowest}


def report(res: dict[str, Any]) -> str:
    oc = res["outcomes"]
    lines = [f"{'category':14} {'inputs':>8} {'ok':>8} {'project':>8} {'bug':>6} {'slow':>5}"]
    for c in CATEGORIES:
        if c in res["mix"]:
            lines.append(f"{c:14} {res['mix'][c]:8,} {oc[(c, 'ok')]:8,} {oc[(c, 'project')]:8,} "
                         f"{oc[(c, 'bug')]:6,} {oc[(c, 'slow')]:5,}")
    nb = sum(v for (c, o), v in oc.items() if o == "bug")
    ns = sum(v for (c, o), v in oc.items() if o == "slow")
    lines.append(f"total: {res['inputs']:,} inputs, {nb} non-project exception(s), {ns} call(s) "
                 f"> {SLOW_S:.0f} s, slowest {res['slowest_s']:.2f} s, {res['seconds']:.1f} s")
    for sig, (cat, k, i) in sorted(res["bugs"].items(), key=lambda x: -x[1][1]):
        lines.append(f"  {k:6} {cat:12} (e.g. input {i}) {sig}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", default=",".join(CATEGORIES))
    a = ap.parse_args(argv)
    res = fuzz(a.n, a.seed, a.jobs, tuple(a.only.split(",")))
    print(report(res))
    bad = sum(v for (c, o), v in res["outcomes"].items() if o in ("bug", "slow"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
