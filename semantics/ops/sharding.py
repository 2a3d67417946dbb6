"""ir/hir/sharding: Reshard and Local. ShardLayout and Mesh are types, not inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.types import IRError, Layout, ShardLayout, StorageKind


@dataclass(frozen=True)
class Reshard(Op):
    """Convert x to a target layout / storage (view, copy, redistribute or collective)."""

    layout: Layout | ShardLayout | None = None
    storage: StorageKind | None = None
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    FAMILY: ClassVar[str] = "sharding"

    def __post_init__(self):
        if self.layout is not None and not isinstance(self.layout, Layout | ShardLayout):
            raise IRError(f"Reshard.layout must be a ShardLayout, a Layout or None, got "
                          f"{self.layout!r}")
        if self.storage is not None and not isinstance(self.storage, StorageKind):
            raise IRError(f"Reshard.storage must be a StorageKind or None, got "
                          f"{self.storage!r}")


@dataclass(frozen=True)
class Local(Op):
    """The current device's local view of a sharded tensor."""

    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    FAMILY: ClassVar[str] = "sharding"
