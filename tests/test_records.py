"""The hot-path records are built by name: each builder in ``core.make`` gives the record that
the NamedTuple's own constructor gives for the same named fields.

A field added to a record (with or without a default) without updating its builder fails here:
the builder is called with every field of the record by keyword, so it must accept each name,
and the result must equal the record built by keyword, field for field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from utilon.core import make
from utilon.core.decision import Grant
from utilon.core.messages import Launch, Preempt, TaskFinished, TaskRef
from utilon.core.snapshot import JobView, StageView
from utilon.model.lifecycle import JobState
from utilon.model.resources import Resources
from utilon.model.utility import Constant

_REF = TaskRef("j", 1, 2)
_STAGE = StageView("map", 0, "map", 4, 0, 3, 1, 0, 5.0, Resources(slots=1), 1.0, False)

# Per record: the builder and a value for every field, distinct among fields of one type so
# that two swapped fields differ (typed: the compiled builders check their arguments' types).
BUILDERS: list[tuple[type[Any], Callable[..., tuple[Any, ...]], dict[str, Any]]] = [
    (TaskRef, make.task_ref, {"job": "j", "stage": 1, "index": 2}),
    (TaskFinished, make.task_finished, {"task": _REF}),
    (Launch, make.launch, {"task": _REF, "machine": "m1"}),
    (Preempt, make.preempt, {"task": _REF, "machine": "m1", "reason": "killed"}),
    (Grant, make.grant, {"job": "j", "slots": 4, "stage": "map",
                         "machines": frozenset({"m1"}), "kill_excess": True, "gang": False}),
    (StageView, make.stage_view, {
        "name": "map", "index": 1, "kind": "reduce", "total": 10, "waiting": 2, "ready": 3,
        "running": 4, "done": 1, "expected_duration": 5.0, "demand": Resources(slots=1),
        "slot_size": 6.0, "gang": True, "request": "r", "started_sum": 7.0}),
    (JobView, make.job_view, {
        "id": "j", "tenant": "t", "submit": 1.0, "weight": 2.0, "priority": 3,
        "job_class": "c", "utility": Constant(1.0), "state": JobState.RUNNING,
        "started": 4.0, "stages": (_STAGE,)}),
]


@pytest.mark.parametrize(("record", "builder", "values"), BUILDERS,
                         ids=[r.__name__ for r, _, _ in BUILDERS])
def test_builder_names_every_field(record: type[Any], builder: Callable[..., tuple[Any, ...]],
                                   values: dict[str, Any]) -> None:
    assert list(values) == list(record._fields)  # a field added: add it here and to make.py
    built = builder(**values)
    assert type(built) is record
    assert built == record(**values)
    assert built._asdict() == values


def test_every_builder_is_listed() -> None:
    """A builder added to ``core.make`` is checked above too."""
    listed = {b.__name__ for _, b, _ in BUILDERS}
    public = {name for name, obj in vars(make).items()
              if callable(obj) and not name.startswith("_")
              and getattr(obj, "__module__", "") == make.__name__}
    assert public == listed


def test_a_builder_that_misses_a_field_is_caught() -> None:
    """What the check above does when a record gains a field its builder does not know."""
    from typing import NamedTuple

    class Ref2(NamedTuple):  # TaskRef with a field added in the middle
        job: str
        attempt: int
        stage: int
        index: int  # type: ignore[assignment]

    def stale(job: str, stage: int, index: int) -> Ref2:  # the builder as it was
        return tuple.__new__(Ref2, (job, stage, index))

    with pytest.raises(TypeError, match="attempt"):
        stale(**{name: f"<{name}>" for name in Ref2._fields})
