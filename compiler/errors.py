"""The compiler's exception types (every one a ``TilefoundryError``).

* ``KernelIRError`` — a kernel-IR program breaks a rule of ``kir.verify``; the message names the
  program, the kernel and the offending instruction as ``to_text`` prints it.
* ``NotSupportedError`` — lowering met an op (or an attribute / dtype of an op) it has no rule
  for; the message names the op. Backends declare the same set in ``capabilities()``, so the
  conformance runner answers NOT_SUPPORTED before compiling.
* ``LoweringError`` — the HIR program cannot be compiled for the given shapes (a shape that
  matches no dispatch variant, an input that does not fit the entry's signature, a value the
  semantics leaves undefined such as ``mean`` over zero elements).
"""

from __future__ import annotations

from tilefoundry.errors import BackendUnsupportedError, TilefoundryError

__all__ = ["CompilerError", "KernelIRError", "LoweringError", "NotSupportedError"]


class CompilerError(TilefoundryError):
    """Base of the compiler's errors."""


class KernelIRError(CompilerError, ValueError):
    """A kernel-IR program is malformed (raised by ``kir.verify``)."""


class NotSupportedError(CompilerError, BackendUnsupportedError):
    """Lowering (or a renderer) has no rule for an op (the message names the op); a
    conformance case raising it is NOT_SUPPORTED."""

    def __init__(self, op: str, detail: str = "", *, stage: str = "the kernel-IR lowering"):
        self.op = op
        super().__init__(f"{op}: not supported by {stage}"
                         + (f" ({detail})" if detail else ""))


class LoweringError(CompilerError, ValueError):
    """The program cannot be compiled for the given shapes / inputs."""
