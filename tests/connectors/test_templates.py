"""The ``{}`` template parser both connectors use."""

from __future__ import annotations

import pytest

from connectors.templates import SlotError, split_slots


@pytest.mark.parametrize(
    ("text", "literals"),
    [
        ("user:{}", ("user:", "")),
        ("order:{}:{}", ("order:", ":", "")),
        ("{{tag}}:{}", ("{tag}:", "")),
        ("http://svc/users/{}?v=2", ("http://svc/users/", "?v=2")),
        ("no slots", ("no slots",)),
    ],
)
def test_split_slots(text: str, literals: tuple[str, ...]) -> None:
    assert split_slots(text) == literals


@pytest.mark.parametrize(
    ("text", "shown"),
    [("k:{id}", "{id}"), ("k:{0}", "{0}"), ("k:{:>5}", "{:>5}"), ("{!r}", "{!r}")],
)
def test_a_slot_that_is_not_empty_is_named(text: str, shown: str) -> None:
    with pytest.raises(SlotError) as caught:
        split_slots(text)
    assert caught.value.field == shown
    assert shown in str(caught.value)


def test_unbalanced_braces_say_why() -> None:
    with pytest.raises(SlotError) as caught:
        split_slots("k:{")
    assert caught.value.field is None
    assert "Single '{' encountered" in str(caught.value)
