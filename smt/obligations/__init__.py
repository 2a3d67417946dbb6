"""The proof obligations; importing this package registers every one of them."""

from __future__ import annotations
