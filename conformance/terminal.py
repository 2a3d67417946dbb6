"""What a backend says reaches the runner's terminal printable, and outputs that cannot be
written are one line (issue 34, item 5).

* ``printable(text)``: control characters (C0 but newline and tab, DEL, C1: ``ESC [2J``, the
  bell), bidirectional and zero-width format characters, line / paragraph separators and lone
  surrogates are written as escapes (``\\x1b``, ``\\x07``, ``\\u202e``); everything else is
  kept. ``terminal_records(records)`` is a copy of the results for printing: every string made
  printable, a message's later lines indented under the verdict line that starts it. The
  results file, JUnit and HTML keep the text as the backend wrote it (they have their own
  escaping).
* A worker's stdout and stderr (file descriptors 1 and 2, so C code and child processes are
  caught too) go to a file beside its faulthandler file (``capture_worker_output``); the runner
  copies what arrives, line by line, printable and prefixed with the worker, to its own stderr
  (``OutputForwarder``) — the runner's stdout is its report's alone (D332).
* ``output_error(e, what, path)``: an ``OSError`` writing an output (a full disk, ``/dev/full``,
  a removed directory, a file past ``RLIMIT_FSIZE``) as the project's one-line error naming the
  output, the reason and the fix.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from tilefoundry.errors import TilefoundryError

__all__ = ["OutputError", "OutputForwarder", "capture_worker_output", "check_results_path",
           "output_error", "output_path", "printable", "results_write_error", "terminal_records",
           "writing"]

#: what a terminal would act on instead of showing: C0 controls but \t and \n, DEL and C1,
#: soft hyphen, Arabic letter mark, Mongolian vowel separator, zero-width and bidi marks,
#: line / paragraph separators, bidi embeddings / isolates, word joiner .. nominal digit
#: shapes, BOM, interlinear annotations, lone surrogates, tag characters
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
                          "\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff"
                          "\U000e0000-\U000e007f]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def printable(text: str) -> str:
    """``text`` with everything a terminal would interpret escaped (newlines and tabs kept)."""
    return _UNPRINTABLE.sub(_escape, text)


def _shown(v: Any, indent: str) -> Any:
    if isinstance(v, str):
        return printable(v).replace("\n", "\n" + indent)
    if isinstance(v, dict):
        return {k: _shown(x, indent) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return type(v)(_shown(x, indent) for x in v)
    return v


def terminal_records(records: list[dict], indent: str = " " * 9) -> list[dict]:
    """Copies of ``records`` for the terminal (see the module docstring)."""
    return [_shown(r, indent) for r in records]


# --- worker output ------------------------------------------------------------------------------
def output_path(fault_path: str | Path) -> Path:
    return Path(str(fault_path) + ".out")


def capture_worker_output(fault_path: str) -> None:
    """In a worker at start: its file descriptors 1 and 2 write to ``output_path``."""
    with contextlib.suppress(OSError):
        fd = os.open(output_path(fault_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with contextlib.suppress(Exception):
            import sys

            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


class OutputForwarder:
    """The runner's side: ``pump(fault_path, who)`` copies the complete lines a worker wrote
    since the last call to ``stream``; ``pump(..., final=True)`` also the last partial line.
    At most ``limit`` bytes per worker file are forwarded (the rest is counted, not shown)."""

    def __init__(self, stream: TextIO, limit: int = 1 << 20):
        self.stream, self.limit = stream, limit
        self.offsets: dict[str, int] = {}
        self.cut: dict[str, int] = {}

    def pump(self, fault_path: str | Path | None, who: str, final: bool = False) -> None:
        if fault_path is None:
            return
        path = output_path(fault_path)
        key = str(path)
        at = self.offsets.get(key, 0)
        try:
            size = path.stat().st_size
            if size <= at:
                return
            with open(path, "rb") as f:
                f.seek(at)
                data = f.read(min(size - at, 1 << 22))
        except OSError:
            return
        end = len(data) if final else data.rfind(b"\n") + 1
        if end <= 0:
            return
        self.offsets[key] = at + end
        chunk = data[:end]
        room = self.limit - min(at, self.limit)
        if len(chunk) > room:
            self.cut[key] = self.cut.get(key, 0) + len(chunk) - room
            chunk = chunk[:room]
        text = chunk.decode("utf-8", "replace")
        lines = [f"[{who}] {printable(line)}\n" for line in text.splitlines()]
        if final and self.cut.get(key):
            lines.append(f"[{who}] ... {self.cut[key]:,} more byte(s) of output not shown\n")
        with contextlib.suppress(Exception):
            self.stream.write("".join(lines))
            self.stream.flush()


# --- outputs that cannot be written -------------------------------------------------------------
class OutputError(TilefoundryError):
    """An output (results file, JUnit, HTML, coverage, reproducers) could not be written."""


def output_error(e: OSError, what: str, path: str | Path | None, resume: str = "") -> OutputError:
    """``e`` raised writing output ``what`` (``path``): one line with the reason and the fix;
    ``resume`` names how to continue (the results file keeps what was written)."""
    reason = e.strerror or type(e).__name__
    target = " ".join(str(x) for x in (what, path) if x not in (None, ""))
    fix = {28: "free space on its file system or write it elsewhere",
           27: "it grew past the file-size limit (ulimit -f): raise it or write it elsewhere",
           13: "make it writable or write it elsewhere", 30: "write it elsewhere",
           2: "create the directory or write it elsewhere"}.get(e.errno or 0,
                                                                 "write it elsewhere")
    return OutputError(f"cannot write {target}: {reason} (errno {e.errno}); {fix}"
                       + (f"; {resume}" if resume else ""))


@contextlib.contextmanager
def writing(what: str, path: str | Path | None) -> Iterator[None]:
    """Run a block that writes output ``what`` (``path``); its ``OSError`` is ``OutputError``."""
    try:
        yield
    except OSError as e:
        raise output_error(e, what, path) from None


def results_write_error(e: OSError, jsonl: str | Path) -> OutputError:
    """An ``OSError`` out of a run: writing its results file ``jsonl`` (an error without a
    file name is a write to the open results file), or another file it names."""
    if e.filename is None or Path(str(e.filename)) == Path(jsonl):
        return output_error(e, "the results file --jsonl", jsonl,
                            "the cases recorded so far are kept: continue with --resume")
    return output_error(e, "", e.filename,
                        f"the cases recorded so far are in {jsonl}: continue with --resume")


def check_results_path(path: Path, error: type[Exception]) -> None:
    """``--jsonl`` must be a regular file (or not exist yet): the run locks it, truncates it
    and reads its results back, which a device (``/dev/null``, ``/dev/full``) or a FIFO
    cannot do."""
    try:
        st = os.stat(path)
    except OSError:
        return  # does not exist yet (or _check_writable reports why it cannot)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else \
            "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or special file"
        raise error(f"--jsonl {path}: {kind}, not a regular file; the run locks, truncates "
                    f"and reads back its results file: name a regular file")
