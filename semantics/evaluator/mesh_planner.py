"""The third collectives implementation: a planner that records collective steps (D430).

``PlanningDevices`` is a ``MeshDevices`` (``mesh_driver.py``) that, besides computing like
``sharding.AllDevices`` (every device in this process), records each collective or movement the
per-device driver asks for as a ``CollectiveStep``: which collective, on which mesh axes (the
process group), the operand's layout and the result layout. The recorded plan is what a lowering
needs host-side; it is checked by *replaying* it (``replay_step``) through the in-process
collectives and comparing with what the driver computed (tests/semantics/evaluator/
test_mesh_planner.py).

``PlanningEvaluator`` is the public ``Evaluator`` with its ``on_mesh`` hook routed through a
``PlanningDevices``; ``plan(module, entry, inputs)`` returns the value and the steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tilefoundry.semantics.evaluator.core import Evaluator, run
from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
from tilefoundry.semantics.evaluator.registry import EvalCtx
from tilefoundry.semantics.evaluator.sharding import ALL_DEVICES, AllDevices, Sharded
from tilefoundry.semantics.types import ShardLayout

__all__ = ["CollectiveStep", "PlanningDevices", "PlanningEvaluator", "plan", "replay_step"]

StepKind = Literal["all_gather", "to_global", "align"]


@dataclass(frozen=True)
class CollectiveStep:
    """One recorded collective: ``kind`` on mesh ``axes`` (the group: the devices that differ
    only in these axes), from layout ``src`` to layout ``dst`` (None: a plain value); ``op`` is
    the op class whose mesh rule asked for it. No step reduces (the reference's mesh rules
    gather, then compute locally, so no reduce order is chosen by a collective)."""

    kind: StepKind
    op: str
    axes: tuple[int, ...]
    src: ShardLayout | None
    dst: ShardLayout | None
    # the operand and result values, kept for replay checks (not part of the plan's identity)
    operand: Any = None
    result: Any = None


class PlanningDevices(AllDevices):
    """Every device in this process, recording each collective the driver asks for."""

    def __init__(self) -> None:
        self.steps: list[CollectiveStep] = []
        self._op = "?"

    def run(self, ctx: EvalCtx, impl: Callable, args: tuple) -> Any:
        self._op = type(ctx.op).__name__
        return run_on_mesh(ctx, impl, args, self)

    def all_gather(self, v: Sharded, axes: list[int]) -> Sharded:
        r = super().all_gather(v, axes)
        self.steps.append(CollectiveStep("all_gather", self._op, tuple(axes), v.layout,
                                         r.layout, v, r))
        return r

    def to_global(self, v: Sharded) -> np.ndarray:
        r = super().to_global(v)
        self.steps.append(CollectiveStep("to_global", self._op,
                                         tuple(range(len(v.mesh.axis_extents))), v.layout,
                                         None, v, r))
        return r

    def align(self, v: object, out: ShardLayout) -> Sharded:
        r = super().align(v, out)
        src = v.layout if isinstance(v, Sharded) else None
        if src != out:  # an operand already in the result layout moves nothing
            axes = tuple(range(len(out.mesh.axis_extents)))
            self.steps.append(CollectiveStep("align", self._op, axes, src, out, v, r))
        return r


def replay_step(step: CollectiveStep, devices: AllDevices = ALL_DEVICES) -> Any:
    """The recorded step executed again by ``devices`` (the in-process collectives)."""
    if step.kind == "all_gather":
        return devices.all_gather(step.operand, list(step.axes))
    if step.kind == "to_global":
        return devices.to_global(step.operand)
    assert step.dst is not None
    return devices.align(step.operand, step.dst)


class PlanningEvaluator(Evaluator):
    """The reference evaluator with its mesh operations recorded (``self.planner.steps``)."""

    def __init__(self, session: Any):
        super().__init__(session)
        self.planner = PlanningDevices()

    def on_mesh(self, ctx: EvalCtx, impl: Callable, args: tuple) -> Any:
        return self.planner.run(ctx, impl, args)


def plan(module: Any, entry: str, inputs: Sequence[np.ndarray]
         ) -> tuple[Any, list[CollectiveStep]]:
    """Evaluate ``module[entry]`` and return its value with the collective steps recorded."""
    value, ev = run(module, entry, inputs, PlanningEvaluator)
    assert isinstance(ev, PlanningEvaluator)
    return value, list(ev.planner.steps)
