"""tilefoundry: executable reference semantics, proof checks and a conformance oracle for tile IRs.

The subpackages live in the repository's top-level folders and are mapped into this one namespace:
``tilefoundry.semantics`` (``semantics/``), ``tilefoundry.smt`` (``smt/``), ``tilefoundry.oracle``
(``oracle/``), ``tilefoundry.compiler`` (``compiler/``), ``tilefoundry.conformance``
(``conformance/``).
"""

from importlib.metadata import PackageNotFoundError, version

from tilefoundry.errors import TilefoundryError

try:
    __version__ = version("tilefoundry")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0.0.0+unknown"

__all__ = ["TilefoundryError", "__version__"]
