"""An operator's output buffer: what may leave, in order, and its hand-over in one batch.

A plain structure (no asyncio, no clock): the operator and its invokers append to it as
records complete, and the operator takes it whole once per loop iteration, posting one
"emit" message to the consumer. So the per-record cost of output is an append.
"""

from __future__ import annotations

from typing import Any

from .queue import Partial


class Output:
    """What may leave an operator, in this order: ``out``, then ``ready``.

    ``out`` holds the outputs of records that finished at once with nothing ahead of
    them (they never entered the queue; ``out_units`` is the capacity they held).
    ``ready`` holds, behind those: queue entries, whole outputs of records done at once
    (a list, one unit each) and :class:`~.queue.Partial` s.

    Guarantee: :meth:`take` hands over everything appended so far, in append order, with
    the capacity units it frees, and leaves the buffer empty.
    """

    __slots__ = ("out", "out_units", "ready")

    def __init__(self) -> None:
        self.out: list[Any] = []
        self.out_units = 0
        self.ready: list[Any] = []

    def is_empty(self) -> bool:
        return not self.ready and not self.out_units

    def take(self) -> tuple[list[Any], int, int]:
        """The outputs in order, the capacity units they free, and how many queued
        records (entries of the queue, not watermarks) they complete."""
        outputs = self.out
        freed = self.out_units
        ready = self.ready
        self.out = []
        self.out_units = 0
        self.ready = []
        records = 0
        for item in ready:
            kind = type(item)
            if kind is list:
                outputs.extend(item)
                freed += 1
            elif kind is Partial:
                outputs.extend(item.outputs)
                freed += item.units
            else:
                outputs.extend(item.outputs)
                freed += item.weight
                if item.group is not None:
                    records += 1
        return outputs, freed, records
