"""Validating loaders, one per file kind a user hands the tool (issue 34, Deliver 2).

Every file the conformance tools read goes through here: results JSON lines (``load_results``:
``read_jsonl``, ``merge``, ``diff``, ``run --resume``, the reports written from them), manifest
TOML (``load_toml``), baselines and capability sets (``load_json``), a reproducer's
``case.json`` and program (``load_case_json``, ``read_text_file``), and the fuzz database's
saved seeds (``fuzz_db_seeds``). Each refuses, as the caller's own ``TilefoundryError`` with a
one-line message naming the file, the line or key and the fix:

* a path that is not a regular file (a FIFO, a device, a directory, a socket), checked with
  ``os.stat`` before opening and again with ``os.fstat`` on the descriptor, opened
  ``O_NONBLOCK`` so a FIFO swapped in between cannot hang the open;
* a file over its kind's size limit (``SIZE_LIMITS``, MiB; ``TILEFOUNDRY_MAX_<KIND>_MB``
  raises one), read no further than the limit;
* bytes that are not UTF-8 (the line and byte offset named); a leading BOM is dropped;
* JSON / TOML nested deeper than ``MAX_DEPTH`` (checked with an explicit stack, never by
  recursion; the parser's own ``RecursionError`` caught as a backstop), an integer of more than
  ``MAX_INT_DIGITS`` digits (refused in the parser's hook, before ``int`` sees it), a key twice
  in one JSON object;
* a field of the wrong type (``check_record``: every key the reports read from a results
  record).

Plain ``json`` / ``tomllib`` parse; the checks around them are hand-written because no kept
library gives a depth-, size- and digit-bounded parse of both formats with these messages.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilefoundry.errors import TilefoundryError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "SIZE_LIMITS", "LoadError", "Results",
           "check_record", "decode_utf8", "fuzz_db_seeds", "load_case_json", "load_json",
           "load_results", "load_toml", "parse_json", "parse_toml", "read_regular",
           "read_text_file", "size_limit"]

#: the deepest nesting of arrays / objects (tables) any file kind has is 5; 32 leaves room
MAX_DEPTH = 32
#: an integer in a file of more digits is refused (2**128 has 39; a seed has at most 20)
MAX_INT_DIGITS = 40
#: size limits per kind, in MiB (``TILEFOUNDRY_MAX_<KIND>_MB`` overrides one)
SIZE_LIMITS: dict[str, float] = {
    "results": 2048.0, "manifest": 16.0, "baseline": 256.0, "capabilities": 16.0,
    "reproducer": 64.0,
}


class LoadError(TilefoundryError, ValueError):
    """A file that cannot be read as its kind (when the caller names no error class)."""


def size_limit(kind: str) -> int:
    """The size limit of ``kind`` in bytes: ``SIZE_LIMITS`` or ``TILEFOUNDRY_MAX_<KIND>_MB``."""
    env = f"TILEFOUNDRY_MAX_{kind.upper()}_MB"
    raw = os.environ.get(env)
    mb = SIZE_LIMITS[kind]
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise LoadError(f"{env}={raw!r}: expected a number of MiB") from None
        if not (math.isfinite(mb) and mb > 0):
            raise LoadError(f"{env}={raw!r}: expected a positive number of MiB")
    return int(mb * 2**20)


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | Path, *, what: str, kind: str,
                 error: type[TilefoundryError] = LoadError, limit: int | None = None,
                 too_big: str | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (``size_limit(kind)``);
    ``error`` naming ``what`` otherwise (``too_big``: the message past the limit). Nothing is
    read from anything else (see the module docstring)."""
    limit = size_limit(kind) if limit is None else limit
    fix = f"give {what} as a regular file"
    try:
        st = os.stat(path)
    except OSError as e:
        raise error(f"{what}: cannot read it ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what}: {_kind_of(st.st_mode)}, not a regular file; {fix}") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{what}: cannot read it ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise error(f"{what}: {_kind_of(st.st_mode)}, not a regular file; {fix}")
        if st.st_size > limit:
            raise error(too_big or _too_big(what, kind, st.st_size, limit))
        chunks, n = [], 0
        while n <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit:  # grew while read
            raise error(too_big or _too_big(what, kind, n, limit))
        return b"".join(chunks)
    except OSError as e:
        if e.errno == errno.EISDIR:
            raise error(f"{what}: a directory, not a regular file; {fix}") from None
        raise error(f"{what}: cannot read it ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _too_big(what: str, kind: str, n: int, limit: int) -> str:
    return (f"{what}: {n:,} bytes, more than the {limit:,}-byte limit of a {kind} file; is it "
            f"the right file? (raise the limit with TILEFOUNDRY_MAX_{kind.upper()}_MB=<MiB>)")


def decode_utf8(data: bytes, what: str, error: type[TilefoundryError] = LoadError, *,
                first_line: int = 1) -> str:
    """``data`` as UTF-8 text (a leading BOM dropped); ``error`` naming the line and column of
    the first invalid byte (``data`` starting at line ``first_line`` of the file)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + first_line
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{what}: line {line}, column {col}: byte "
                    f"{data[e.start:e.start + 1]!r} is not UTF-8 ({e.reason}); save the file "
                    f"as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class _Bad(Exception):
    """Raised inside a parser hook; turned into the caller's error with the place."""


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise _Bad(f"an integer of {len(s.lstrip('-')):,} digits (more than {MAX_INT_DIGITS}; "
                   f"starts {s[:12]}...)")
    return int(s)


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Bad(f"key {dup!r} appears twice in one object")
    return d


def _constant(s: str) -> float:
    raise _Bad(f"{s} is not JSON (no NaN / Infinity tokens)")


def _nan_ok(s: str) -> float:
    return float(s)


def check_tree(obj: Any, strings: bool = False) -> str | None:
    """Why ``obj`` (parsed JSON / TOML) is refused: nested deeper than ``MAX_DEPTH``, holding
    an integer of more than ``MAX_INT_DIGITS`` digits or (``strings``) a string with a lone
    surrogate (``"\\ud800"``: valid JSON, but no UTF-8 report can hold it); None when it is
    not. An explicit stack: no recursion however deep ``obj`` is."""
    big = 10 ** MAX_INT_DIGITS
    stack: list[tuple[Any, int, str]] = [(obj, 1, "")]
    while stack:
        x, depth, at = stack.pop()
        if isinstance(x, dict):
            items: Any = x.items()
        elif isinstance(x, list):
            items = ((f"[{i}]", v) for i, v in enumerate(x))
        else:
            if isinstance(x, int) and not isinstance(x, bool) and not -big < x < big:
                return f"{at or 'the value'}: an integer of more than {MAX_INT_DIGITS} digits"
            if isinstance(x, str) and _SURROGATE.search(x):
                return f"{at or 'the value'}: a string with a lone surrogate (\\ud800-\\udfff)"
            continue
        if depth > MAX_DEPTH:
            return f"{at or 'the value'}: nested deeper than {MAX_DEPTH} levels"
        for k, v in items:
            if strings and isinstance(k, str) and _SURROGATE.search(k):
                return f"{at or 'the value'}: a key with a lone surrogate (\\ud800-\\udfff)"
            if isinstance(v, dict | list | int) or (strings and isinstance(v, str)):
                key = k if str(k).startswith("[") else (f".{k}" if at else str(k))
                stack.append((v, depth + 1, at + key))
    return None


def parse_json(text: str, what: str, error: type[TilefoundryError] = LoadError, *,
               fix: str = "", allow_nan: bool = False) -> Any:
    """``text`` as JSON, bounded (see the module docstring); ``error`` naming ``what`` and the
    problem, then ``fix``."""
    tail = f"; {fix}" if fix else ""
    try:
        obj = json.loads(text, parse_int=_parse_int, object_pairs_hook=_pairs,
                         parse_constant=_nan_ok if allow_nan else _constant)
    except _Bad as e:
        raise error(f"{what}: {e}{tail}") from None
    except json.JSONDecodeError as e:
        raise error(f"{what}: not valid JSON (line {e.lineno} column {e.colno}: {e.msg})"
                    f"{tail}") from None
    except RecursionError:
        raise error(f"{what}: nested deeper than {MAX_DEPTH} levels{tail}") from None
    why = check_tree(obj, strings=_ESCAPED_SURROGATE.search(text) is not None)
    if why is not None:
        raise error(f"{what}: {why}{tail}")
    return obj


def parse_toml(text: str, what: str, error: type[TilefoundryError] = LoadError, *,
               fix: str = "") -> dict:
    """``text`` as TOML, bounded as ``parse_json`` (tomllib refuses a key twice itself)."""
    tail = f"; {fix}" if fix else ""
    try:
        obj = tomllib.loads(text, parse_float=float)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{what}: not valid TOML ({e}){tail}") from None
    except RecursionError:
        raise error(f"{what}: nested deeper than {MAX_DEPTH} levels{tail}") from None
    except ValueError as e:  # an integer past int's digit limit
        raise error(f"{what}: a value it cannot hold ({e}){tail}") from None
    why = check_tree(obj)
    if why is not None:
        raise error(f"{what}: {why}{tail}")
    return obj


def read_text_file(path: str | Path, *, what: str, kind: str,
                   error: type[TilefoundryError] = LoadError) -> str:
    """A regular UTF-8 text file of ``kind``'s size limit."""
    return decode_utf8(read_regular(path, what=what, kind=kind, error=error), what, error)


def load_json(path: str | Path, *, what: str, kind: str,
              error: type[TilefoundryError] = LoadError, fix: str = "",
              allow_nan: bool = False) -> Any:
    """A regular, UTF-8, bounded JSON file of ``kind``."""
    text = read_text_file(path, what=what, kind=kind, error=error)
    return parse_json(text, what, error, fix=fix, allow_nan=allow_nan)


def load_toml(path: str | Path, *, what: str, kind: str,
              error: type[TilefoundryError] = LoadError, fix: str = "") -> dict:
    """A regular, UTF-8, bounded TOML file of ``kind``."""
    return parse_toml(read_text_file(path, what=what, kind=kind, error=error), what, error,
                      fix=fix)


def load_case_json(path: str | Path, error: type[TilefoundryError] = LoadError) -> dict:
    """A reproducer's ``case.json``: a bounded JSON object whose keys the replay reads have
    their types (``entry`` a string, ``inputs`` / ``observed`` lists of objects with a string
    ``dtype``, ``id`` / ``status`` / ``backend`` strings, ``seed`` an int, ``tuple_result`` a
    bool)."""
    fix = "rebuild the reproducer (rerun the case with --repro-dir)"
    what = str(path)
    meta = load_json(path, what=what, kind="reproducer", error=error, fix=fix, allow_nan=True)
    if not isinstance(meta, dict):
        raise error(f"{what}: expected a JSON object (a reproducer's case description), got "
                    f"{_tname(meta)}; {fix}")
    for key in ("entry", "inputs"):
        if key not in meta:
            raise error(f"{what}: key {key!r} is missing: not a reproducer's case description; "
                        f"{fix}")
    spec: dict[str, tuple[type | tuple[type, ...], bool]] = {
        "entry": (str, True), "id": (str, False), "status": (str, False),
        "backend": ((str, type(None)), False), "summary": (str, False),
        "seed": (int, False), "tuple_result": (bool, False), "format": (int, False),
        "program": ((str, type(None)), False), "catalog": ((str, type(None)), False),
        "inputs": (list, True), "observed": ((list, type(None)), False)}
    for key, (types, _) in spec.items():
        if key in meta and not _is(meta[key], types):
            raise error(f"{what}: key {key!r} must be {_want(types)}, got {_tname(meta[key])}"
                        f"; {fix}")
    meta.setdefault("id", "?")
    for key in ("inputs", "observed"):
        for i, m in enumerate(meta.get(key) or ()):
            if not isinstance(m, dict) or not isinstance(m.get("dtype"), str):
                raise error(f"{what}: {key}[{i}] must be an object with a string 'dtype', got "
                            f"{_short(m)}; {fix}")
    return meta


# =============================================================================================
# results (JSON lines)
# =============================================================================================
@dataclass
class Results:
    """A runner's JSON-lines file: its run header, its case records by id (the first of an id
    wins) and its last summary record."""

    header: dict | None
    records: dict[str, dict]
    summary: dict | None
    skipped: list[int]


_NUM = (int, float)
_STRS = "list of strings"
#: key -> (types, what a list holds: "str" or "dict" or None) of a case record
_RECORD: dict[str, tuple[tuple[type, ...], str | None]] = {
    "id": ((str,), None), "verdict": ((str,), None), "family": ((str,), None),
    "seconds": (_NUM, None), "message": ((str,), None), "ops": ((list,), "str"),
    "dtypes": ((list,), "str"), "outputs": ((list, type(None)), "dict"),
    "attempts": ((list, type(None)), "str"), "repro": ((str, type(None)), None),
    "repro_error": ((str, type(None)), None), "raw_verdict": ((str,), None),
    "manifest": ((str,), None), "program": ((str, type(None)), None),
    "elements": ((int,), None), "unjudged": ((int,), None),
    "diagnosis": ((dict, type(None)), None), "warnings": ((list, type(None)), "dict"),
    "expect_error": ((str, type(None)), None),
}
_OUTPUT: dict[str, tuple[tuple[type, ...], str | None]] = {
    "output": ((str, int), None), "mismatches": ((int,), None), "total": ((int,), None),
    "classes": ((list, type(None)), "dict"), "diagnosis": ((dict, type(None)), None),
    "contract": ((str, type(None)), None), "worst_index": ((list, int, type(None)), None),
}
_CLASS = {"class": ((str, type(None)), None), "count": ((int,), None),
          "index": ((list,), None), "expected_hex": ((str,), None),
          "observed_hex": ((str,), None)}
#: the keys every class of an output carries (``judge._output_detail``; the HTML report reads
#: them all)
_CLASS_KEYS = ("class", "count", "index", "expected", "expected_hex", "observed", "observed_hex")
_WARNING = {"message": ((str,), None), "count": ((int,), None), "where": ((str,), None),
            "category": ((str,), None), "phase": ((str,), None)}
_DIAGNOSIS = {"least": ((list,), None), "none": ((int, bool), None), "rejected": ((int,), None),
              "searched": ((list,), "str"), "evaluations": ((int,), None),
              "greedy": ((bool,), None), "op": ((str, type(None)), None),
              "classes": ((list,), "dict"), "class": ((str, type(None)), None),
              "count": ((int,), None)}
_HEADER = {"backend": ((str,), None), "seed": ((int,), None),
           "shard": ((list, type(None)), None)}


def _is(v: Any, types: type | tuple[type, ...]) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(v, bool) and bool not in types:
        return False
    return isinstance(v, types)


def _tname(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v),
                                                                         type(v).__name__)


def _want(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_tname(t()) if t is not type(None) else "null" for t in types)


def _short(v: Any) -> str:
    s = json.dumps(v)[:60] if not isinstance(v, float) or math.isfinite(v) else repr(v)
    return s


def _check_fields(obj: dict, spec: dict, at: str) -> str | None:
    for key, (types, item) in spec.items():
        if key not in obj:
            continue
        v = obj[key]
        if not _is(v, types):
            return f"{at}{key!r} must be {_want(types)}, got {_tname(v)}"
        if isinstance(v, list) and item is not None:
            want = str if item == "str" else dict
            bad = next((i for i, x in enumerate(v) if not isinstance(x, want)), None)
            if bad is not None:
                return f"{at}{key}[{bad}] must be {_tname(want())}, got {_tname(v[bad])}"
    return None


def _check_diagnosis(d: Any, at: str) -> str | None:
    """Why a record's (or an output's) ``diagnosis`` is refused (``oracle.diagnose.Diagnosis.
    to_json``'s keys with their types); None when it is fine."""
    if d is None:
        return None
    why = _check_fields(d, _DIAGNOSIS, at)
    if why is not None:
        return why
    for j, s in enumerate(d.get("least") or ()):
        if not isinstance(s, list) or not all(isinstance(x, str) for x in s):
            return f"{at}least[{j}] must be a list of relaxation names"
    for j, c in enumerate(d.get("classes") or ()):
        why = _check_fields(c, _DIAGNOSIS, f"{at}classes[{j}].")
        for k, s in enumerate(c.get("least") or ()):
            if why is None and (not isinstance(s, list) or not all(isinstance(x, str) for x in s)):
                why = f"{at}classes[{j}].least[{k}] must be a list of relaxation names"
        if why is not None:
            return why
    return None


def check_record(obj: dict) -> str | None:
    """Why a results-file line (a parsed object) is refused: a key of a run header or a case
    record of the wrong type (those the reports and campaigns read); None when it is fine."""
    from tilefoundry.conformance.cases import VERDICTS

    kind = obj.get("type")
    if kind == "run":
        why = _check_fields(obj, _HEADER, "")
        if why is None and obj.get("shard") is not None and not (
                len(obj["shard"]) == 2 and all(_is(x, int) for x in obj["shard"])):
            why = f"'shard' must be [i, n], got {_short(obj['shard'])}"
        return why
    if kind == "summary":
        sh = obj.get("shard")
        if sh is not None and not (isinstance(sh, list) and len(sh) == 2
                                   and all(_is(x, int) for x in sh)):
            return f"'shard' must be null or [i, n], got {_short(sh)}"
        return None
    if kind != "case":
        return None
    for key in ("id", "verdict"):
        if key not in obj:
            return f"a case record without {key!r}"
    why = _check_fields(obj, _RECORD, "")
    if why is not None:
        return why
    if obj["verdict"] not in VERDICTS:
        return f"'verdict' {obj['verdict'][:40]!r} is none of {', '.join(VERDICTS)}"
    why = _check_diagnosis(obj.get("diagnosis"), "diagnosis.")
    if why is not None:
        return why
    for i, o in enumerate(obj.get("outputs") or ()):
        why = _check_fields(o, _OUTPUT, f"outputs[{i}].") or \
            _check_diagnosis(o.get("diagnosis"), f"outputs[{i}].diagnosis.")
        if why is None:
            for j, c in enumerate(o.get("classes") or ()):
                missing = [k for k in _CLASS_KEYS if k not in c]
                why = why or (f"outputs[{i}].classes[{j}] without {missing[0]!r}" if missing
                              else _check_fields(c, _CLASS, f"outputs[{i}].classes[{j}]."))
        if why is not None:
            return why
    for i, w in enumerate(obj.get("warnings") or ()):
        missing = [k for k in ("message", "count", "where", "category", "phase") if k not in w]
        why = f"warnings[{i}] without {missing[0]!r}" if missing else \
            _check_fields(w, _WARNING, f"warnings[{i}].")
        if why is not None:
            return why
    return None


def load_results(path: str | Path, *, error: type[TilefoundryError] = LoadError,
                 skip_bad: bool = False) -> Results:
    """A runner's JSON-lines file, validated line by line: each line a JSON object within the
    bounds, each run header / case record with its keys' types (``check_record``). A torn last
    line is ignored (a runner killed while writing it). Any other bad line is ``error`` naming
    the file, the line and what is wrong, or with ``skip_bad`` its number goes to
    ``Results.skipped`` and the line is left out (``--resume`` runs its case again)."""
    p = Path(path)
    what = str(p)
    data = read_regular(p, what=what, kind="results", error=error)
    fix = ("it was not written by the conformance runner, or was edited; restore it or "
           "remove the line")
    lines = data.split(b"\n")
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    header: dict | None = None
    summary: dict | None = None
    recs: dict[str, dict] = {}
    skipped: list[int] = []
    last = len(lines) - 1
    for n, raw in enumerate(lines):
        if not raw.strip():
            continue
        at = f"{what}: line {n + 1}"
        try:
            line = decode_utf8(raw, what, error, first_line=n + 1)
            obj = parse_json(line, at, error, allow_nan=True)
            if not isinstance(obj, dict):
                raise error(f"{at}: not a JSON object ({_tname(obj)})")
            why = check_record(obj)
            if why is not None:
                raise error(f"{at}: {why}")
        except TilefoundryError as e:
            if n == last and not data.endswith(b"\n"):  # a line cut by a killed runner
                break
            if skip_bad:
                skipped.append(n + 1)
                continue
            raise error(f"{e}; {fix}") from None
        kind = obj.get("type")
        if kind == "run":
            header = header or obj
        elif kind == "case" and obj["id"] not in recs:
            recs[obj["id"]] = obj
        elif kind == "summary":
            summary = obj
    return Results(header, recs, summary, skipped)


# =============================================================================================
# the fuzz database
# =============================================================================================
#: a saved seed: ASCII digits, at most this many (the fuzz's seeds are below 2**64)
MAX_SEED_DIGITS = 20


def fuzz_db_seeds(db: Any, key: bytes, *, warn: Callable[[str], None] | None = None
                  ) -> list[int]:
    """The saved failing seeds of ``key`` in a hypothesis ``DirectoryBasedExampleDatabase``,
    read here (not by ``db.fetch``, which opens whatever is in the folder): each entry a
    regular file of at most ``MAX_SEED_DIGITS`` ASCII digits. A bad entry (a FIFO, a device,
    a 5,000-digit number, bytes that are no number) is skipped with a warning naming its file
    and the command that removes it, so it never stops a fuzz run; sorted, each once."""
    warn = warn or (lambda m: print(m, file=sys.stderr))
    folder = Path(db._key_path(key))
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as e:
        warn(f"tilefoundry conformance fuzz: warning: fuzz database folder {folder}: cannot "
             f"list it ({e.strerror or e}); no saved seed is replayed")
        return []
    seeds: set[int] = set()
    for name in names:
        f = folder / name
        try:
            raw = read_regular(f, what=f"fuzz database entry {f}", kind="fuzz_db",
                               limit=MAX_SEED_DIGITS,
                               too_big=f"fuzz database entry {f}: not a seed (more than "
                                       f"{MAX_SEED_DIGITS} bytes; a seed is at most "
                                       f"{MAX_SEED_DIGITS} ASCII digits)")
            if not (raw.isascii() and raw.isdigit()):
                raise LoadError(f"fuzz database entry {f}: {_short(raw.decode('latin-1')[:20])}"
                                f" is not a seed (up to {MAX_SEED_DIGITS} ASCII digits)")
        except TilefoundryError as e:
            warn(f"tilefoundry conformance fuzz: warning: skipped {e}; remove it: rm -rf "
                 f"{_quote(str(f))}")
            continue
        if int(raw) >= 2**64:
            warn(f"tilefoundry conformance fuzz: warning: skipped fuzz database entry {f}: seed "
                 f"{raw.decode()} is not below 2**64; remove it: rm -rf {_quote(str(f))}")
            continue
        seeds.add(int(raw))
    return sorted(seeds)


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)
