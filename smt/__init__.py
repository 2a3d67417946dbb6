"""tilefoundry.smt: Z3 encodings of the semantic tables and laws, and the proof obligations.

The tables proved here are imported from ``tilefoundry.semantics`` — never restated."""

# Nothing here imports z3: ``tilefoundry prove`` imports it on use, so the rest of the package
# (the conformance runner above all) runs on a machine without z3-solver.
from tilefoundry.errors import TilefoundryError

#: Z3 resource limit per query (deterministic, unlike wall time).
DEFAULT_RLIMIT = 20_000_000


class ProveError(TilefoundryError, ValueError):
    """Bad input to the prover: an unknown obligation name, an unloadable module file, z3-solver
    not installed."""
