"""The DSL's error type: every authoring error names the construct and the source location."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tilefoundry.errors import TilefoundryError


@dataclass(frozen=True)
class SourceInfo:
    """Where a parsed piece of source lives: the file name, the offsets that map the parsed
    text's (line, column) back to the file, and the file's lines (for the caret display)."""

    filename: str
    line_offset: int = 0
    col_offset: int = 0
    lines: tuple[str, ...] = ()

    def where(self, node: ast.AST | None) -> tuple[int | None, int | None, str | None]:
        """(1-based line, 1-based column, the source line) of ``node`` in the file."""
        if node is None or not hasattr(node, "lineno"):
            return None, None, None
        line = node.lineno + self.line_offset
        col = node.col_offset + self.col_offset + 1
        text = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else None
        return line, col, text


class DSLError(TilefoundryError, ValueError):
    """An authoring error in @func source: names the construct and its location.

    ``str(e)`` reads ``file:line:col: construct: message`` followed by the source line and a
    caret under the column; the parts are also attributes (``filename``, ``line``, ``col``,
    ``construct``, ``detail``)."""

    def __init__(self, message: str, *, construct: str | None = None,
                 filename: str | None = None, line: int | None = None, col: int | None = None,
                 source_line: str | None = None):
        self.detail = message
        self.construct = construct
        self.filename, self.line, self.col = filename, line, col
        self.source_line = source_line
        head = ""
        if filename is not None or line is not None:
            head = f"{filename or '<dsl>'}:{line if line is not None else '?'}:" \
                   f"{col if col is not None else '?'}: "
        text = f"{head}{construct + ': ' if construct else ''}{message}"
        if source_line is not None and col is not None:
            stripped = source_line.rstrip("\n")
            lead = len(stripped) - len(stripped.lstrip())
            shown = stripped.strip()
            # the caret sits under the column within the shown (left-stripped) line
            caret = max(0, col - 1 - lead)
            text += f"\n    {shown}\n    {' ' * caret}^"
        super().__init__(text)


def located(src: SourceInfo | None, node: ast.AST | None, construct: str,
            message: str) -> DSLError:
    """A DSLError at ``node`` of ``src``."""
    if src is None:
        return DSLError(message, construct=construct)
    line, col, text = src.where(node)
    return DSLError(message, construct=construct, filename=src.filename, line=line, col=col,
                    source_line=text)
