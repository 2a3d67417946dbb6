"""The versions of everything a verdict depends on: recorded in every JSON-lines header, printed
by ``tilefoundry selfcheck`` and ``tilefoundry --version --verbose``.

A peer's behaviour is a function of its version and code path (torch's vectorized CPU kernels
differ from its scalar ones; ml_dtypes 0.7 rounds differently from 0.6), so a record without
them cannot be reproduced. Versions come from the installed distributions' metadata; torch is
imported only to read its CPU capability (the ATen dispatch level), and only when installed.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

#: distribution names, in the order they are printed
PACKAGES = ("numpy", "ml_dtypes", "torch", "triton", "z3-solver", "hypothesis", "sympy")


def package_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None where it is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def torch_cpu_capability() -> str | None:
    """torch's CPU dispatch level (``default`` / ``avx2`` / ``avx512`` ...; follows
    ``ATEN_CPU_CAPABILITY``), or None where torch is not installed."""
    if package_version("torch") is None:
        return None
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except Exception as e:  # a broken torch install is reported, not raised: this is a report
        return f"unavailable ({type(e).__name__}: {e})"


def environment() -> dict[str, str | None]:
    """The tilefoundry, Python, platform and peer versions, plus torch's CPU capability."""
    from tilefoundry import __version__

    env: dict[str, str | None] = {
        "tilefoundry": __version__,
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
    }
    for dist in PACKAGES:
        env[dist] = package_version(dist)
    env["torch_cpu_capability"] = torch_cpu_capability()
    return env


def format_environment(env: dict[str, str | None] | None = None) -> str:
    env = environment() if env is None else env
    return "\n".join(f"  {k:22} {'not installed' if v is None else v}" for k, v in env.items())
