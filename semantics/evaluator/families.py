"""Importing this module registers every family's evaluator implementations."""

from __future__ import annotations

from tilefoundry.semantics.evaluator import math, nn, shape, sharding, tensor  # noqa: F401
