"""docs/compiler.md stays current: its python blocks run, and every ``$ tilefoundry compile``
console block is the command's output now."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from tilefoundry.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "compiler.md"


def test_python_blocks_run():
    ns: dict = {}
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"compiler.md[block {i}]", "exec"), ns)


def test_print_after_blocks_are_current():
    blocks = re.findall(r"```console\n\$ (tilefoundry compile [^\n]*)\n(.*?)```",
                        PAGE.read_text(), flags=re.S)
    assert len(blocks) >= 3
    for cmd, shown in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(shlex.split(cmd)[1:]) == 0
        assert out.getvalue() == shown, f"docs/compiler.md is stale for: {cmd}\n{out.getvalue()}"
    fused = next(s for c, s in blocks if "rmsnorm " in c and "--print-after fuse" in c)
    assert fused.count("\n  kernel ") == 1  # the RMSNorm program is one fused kernel


def test_the_rendered_triton_rmsnorm_kernel_is_current():
    """The Triton section shows the RMSNorm kernel as `--target triton-cuda --print-after
    render` prints it (the kernel after the prelude)."""
    text = PAGE.read_text()
    m = re.search(r"```text\n(def k_.*?)```", text, flags=re.S)
    assert m, "docs/compiler.md lost its rendered Triton kernel"
    out = io.StringIO()
    cmd = ("compile tilefoundry.compiler.examples:EXAMPLES rmsnorm --shape 4x64 --shape 64 "
           "--target triton-cuda --print-after render")
    with contextlib.redirect_stdout(out):
        assert main(shlex.split(cmd)) == 0
    rendered = out.getvalue()
    kernel = rendered[rendered.index("def k_"):rendered.index("\n\nKERNELS")].rstrip("\n") + "\n"
    assert m.group(1) == kernel
