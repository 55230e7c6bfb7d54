"""The identity memo: one computation per remembered object, least recently used out first."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from worldsim.domain.memo import IdentityMemo


@given(
    capacity=st.integers(1, 4),
    asks=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)), max_size=40),
)
def test_a_value_is_made_once_while_remembered_and_again_once_forgotten(
    capacity: int, asks: list[tuple[str, int]]
) -> None:
    objects = [[i] for i in range(6)]  # distinct live objects (lists: equal ones are not the same)
    memo: IdentityMemo[tuple[str, int, int]] = IdentityMemo(capacity)
    made: list[tuple[str, int]] = []
    model: OrderedDict[tuple[str, int], None] = OrderedDict()  # what should be remembered
    expected_made: list[tuple[str, int]] = []
    for kind, i in asks:

        def make(kind: str = kind, i: int = i) -> tuple[str, int, int]:
            made.append((kind, i))
            return (kind, i, len(made))

        value = memo.get(kind, objects[i], make)
        assert value[:2] == (kind, i)
        if (kind, i) in model:
            model.move_to_end((kind, i))
        else:
            expected_made.append((kind, i))
            model[(kind, i)] = None
            if len(model) > capacity:
                model.popitem(last=False)
    assert made == expected_made


def test_an_equal_but_other_object_gets_its_own_value() -> None:
    memo: IdentityMemo[int] = IdentityMemo(8)
    first, second = [1], [1]
    assert memo.get("k", first, lambda: 1) == 1
    assert memo.get("k", second, lambda: 2) == 2
    assert memo.get("k", first, lambda: 3) == 1
