"""Inventories and the alignment of posteriors to them (engine.inventory), and both found
again instead of rebuilt: the ArmSet of an inventory seen lately (ArmSetCache) and the last
alignment of an unchanged posterior mapping. Whatever is reused, the result must be what
building everything afresh gives, errors included."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.engine import (
    Arm,
    ArmSet,
    InvalidInput,
    LearningConfig,
    Phase,
    Posterior,
    select_arms,
)
from learning_bot.engine.inventory import ArmSetCache, align_posteriors
from learning_bot.engine.report_json import arms_from_json


def arms(n: int = 5, cost: int = 10) -> list[Arm]:
    return [Arm(f"tool:x:a{i}", cost + i, label=f"A{i}") for i in range(n)]


def body(items: list[Arm]) -> list[dict[str, Any]]:
    return [{"armId": a.id, "tokenCost": a.token_cost, "label": a.label} for a in items]


# --- alignment ------------------------------------------------------------------------------


def test_align_fills_missing_posteriors_with_priors() -> None:
    inventory = [Arm("tool:x:a", 1), Arm("file:w:b.md", 1), Arm("skill:go:main", 1)]
    arrays = ArmSet(inventory).align({"skill:go:main": Posterior(7, 8, 9)})
    assert arrays.alpha.tolist() == [3.0, 1.0, 7.0]
    assert arrays.beta.tolist() == [1.0, 1.0, 8.0]
    assert arrays.pulls.tolist() == [0, 0, 9]


def test_align_posteriors_reads_tuples_and_objects_alike() -> None:
    inventory = [Arm("tool:x:a", 1), Arm("file:w:b.md", 1), Arm("skill:go:main", 1)]
    arm_set = ArmSet(inventory)
    tuples = align_posteriors(arm_set, {"skill:go:main": (7.0, 8.0, 9), "tool:x:gone": (1, 1, 1)})
    objects = align_posteriors(arm_set, {"skill:go:main": Posterior(7, 8, 9)})
    for arrays in (tuples, objects, arm_set.align({"skill:go:main": Posterior(7, 8, 9)})):
        assert arrays.alpha.tolist() == [3.0, 1.0, 7.0]
        assert arrays.beta.tolist() == [1.0, 1.0, 8.0]
        assert arrays.pulls.tolist() == [0, 0, 9]
        assert arrays.pulls.dtype == np.int64
    empty = align_posteriors(arm_set, {})
    assert empty.alpha.tolist() == [3.0, 1.0, 3.0]
    empty.alpha[0] = 99.0  # the arrays are the caller's to update in place
    assert align_posteriors(arm_set, None).alpha.tolist() == [3.0, 1.0, 3.0]


@pytest.mark.parametrize(
    "value",
    [
        (0.0, 1.0, 0),
        (1.0, -2.0, 0),
        (math.inf, 1.0, 0),
        (math.nan, 1.0, 3),
        (1.0, 1.0, -2),
        (1.0, 1.0, 2.5),
        (1.0, 1.0),
        "abc",
    ],
)
def test_align_posteriors_refuses_impossible_values(value: Any) -> None:
    arm_set = ArmSet(arms(2))
    with pytest.raises(InvalidInput):
        align_posteriors(arm_set, {arm_set.ids[1]: value})


# --- ArmSetCache: lists of Arm ----------------------------------------------------------------


def test_the_same_arms_give_the_same_set() -> None:
    cache = ArmSetCache()
    inventory = arms()
    first = cache.for_arms(inventory)
    assert cache.for_arms(list(inventory)) is first
    assert cache.for_arms(tuple(inventory)) is first


def test_other_arm_objects_with_the_same_ids_and_costs_give_the_same_set() -> None:
    cache = ArmSetCache()
    first = cache.for_arms(arms())
    again = [Arm(a.id, a.token_cost, label="other") for a in arms()]
    assert cache.for_arms(again) is first


def test_a_changed_description_or_content_gives_another_set() -> None:
    """Descriptions and contents feed lexical relevance to a request (engine.context_policy):
    an inventory whose tool descriptions changed is another inventory, not the one cached."""
    cache = ArmSetCache()
    described = [Arm(a.id, a.token_cost, description="reads files") for a in arms()]
    first = cache.for_arms(described)
    same = [Arm(a.id, a.token_cost, description="reads files") for a in arms()]
    assert cache.for_arms(same) is first
    changed = [Arm(a.id, a.token_cost, description="sends mail") for a in arms()]
    second = cache.for_arms(changed)
    assert second is not first
    assert {a.description for a in second.arms} == {"sends mail"}
    contents = [Arm(a.id, a.token_cost, content="a memory") for a in arms()]
    assert {a.content for a in cache.for_arms(contents).arms} == {"a memory"}


def test_another_cost_order_or_id_gives_another_set() -> None:
    cache = ArmSetCache()
    inventory = arms()
    first = cache.for_arms(inventory)
    dearer = [Arm(a.id, a.token_cost + (i == 2), a.label) for i, a in enumerate(inventory)]
    second = cache.for_arms(dearer)
    assert second is not first and second.costs.tolist() != first.costs.tolist()
    reordered = cache.for_arms(list(reversed(inventory)))
    assert reordered.ids == tuple(reversed(first.ids))
    renamed = cache.for_arms([*inventory[:-1], Arm("tool:x:other", 14)])
    assert renamed.ids[-1] == "tool:x:other"
    assert cache.for_arms(inventory) is first


def test_the_cache_keeps_a_few_inventories_and_a_bounded_number_of_arms() -> None:
    cache = ArmSetCache(size=3, max_arms=12)
    sets = [cache.for_arms(arms(4, cost)) for cost in (1, 2, 3)]
    assert all(cache.for_arms(arms(4, cost)) is s for cost, s in zip((1, 2, 3), sets, strict=True))
    cache.for_arms(arms(4, 4))  # the least recently used (cost 1) goes
    assert cache.for_arms(arms(4, 2)) is sets[1]
    assert cache.for_arms(arms(4, 1)) is not sets[0]
    big = cache.for_arms(arms(20, 5))  # past max_arms on its own: kept alone
    assert cache.for_arms(arms(20, 5)) is big
    assert cache.for_arms(arms(4, 3)) is not sets[2]


def test_a_list_that_is_not_all_arms_is_refused_even_after_its_ids_were_seen() -> None:
    cache = ArmSetCache()
    inventory = arms(3)
    cache.for_arms(inventory)

    class Impostor:
        def __init__(self, arm: Arm) -> None:
            self.id, self.token_cost = arm.id, arm.token_cost

    with pytest.raises(InvalidInput, match="expected Arm objects, got Impostor"):
        cache.for_arms([*inventory[:2], Impostor(inventory[2])])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="unique"):
        cache.for_arms([inventory[0], inventory[0]])


def test_select_arms_on_a_list_reuses_its_set_and_selects_as_a_new_set_does() -> None:
    inventory = [Arm(f"tool:x:a{i}", 5 + i % 7) for i in range(300)]
    cfg = LearningConfig(phase=Phase.ACTIVE, baseline_rate=0.0, token_budget=400, min_pulls=0)
    for seed in range(5):
        assert select_arms(list(inventory), None, cfg, seed) == select_arms(
            ArmSet(inventory), None, cfg, seed
        )
    assert ArmSet.of(list(inventory)) is ArmSet.of(inventory)


# --- ArmSetCache: the select body's JSON array ------------------------------------------------


def test_an_equal_json_array_gives_the_same_set() -> None:
    cache = ArmSetCache()
    first = cache.for_json(body(arms()))
    assert cache.for_json(json.loads(json.dumps(body(arms())))) is first
    assert first.ids == tuple(a.id for a in arms())
    assert first.costs.tolist() == [a.token_cost for a in arms()]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tokenCost": True}, "whole number"),
        ({"tokenCost": 1.5}, "whole number"),
        ({"tokenCost": -1}, "whole number"),
        ({"label": "\x00"}, "label"),
        ({"label": "x" * 600}, "label"),
        ({"included": 1}, "true or false"),
        ({"armId": "tool:x:"}, "name"),
        ({"content": 7}, "content must be a string"),
    ],
)
def test_after_a_good_array_a_bad_one_is_refused_as_it_would_be_first(
    change: dict[str, Any], message: str
) -> None:
    """An array equal to a cached one except in kinds of values that compare equal (true and 1)
    or in one bad field must fail with arms_from_json's message, not reuse the cached set."""
    good = [{**item, "included": True} for item in body(arms(3, 1))]  # `true` equals cost 1
    cache = ArmSetCache()
    cache.for_json(good)
    bad = json.loads(json.dumps(good))
    bad[0].update(change)
    with pytest.raises(InvalidInput) as fresh:
        arms_from_json(bad)
    with pytest.raises(InvalidInput, match=message) as cached:
        cache.for_json(bad)
    assert str(cached.value) == str(fresh.value)


def test_a_float_cost_with_a_whole_value_reads_as_the_int_cost() -> None:
    cache = ArmSetCache()
    first = cache.for_json(body(arms(3)))
    floats = [{**item, "tokenCost": float(item["tokenCost"])} for item in body(arms(3))]
    assert cache.for_json(floats).costs.tolist() == first.costs.tolist()


def test_changing_the_array_after_it_was_read_does_not_change_what_is_cached() -> None:
    cache = ArmSetCache()
    data = body(arms(3))
    first = cache.for_json(data)
    data[1]["tokenCost"] = 999
    second = cache.for_json(data)
    assert second is not first
    assert second.costs.tolist()[1] == 999
    assert first.costs.tolist()[1] == 11


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-2, max_value=3)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1, max_value=3)
    | st.sampled_from(["", "x", "tool:x:a", "tool:x:b", "memory:m:c", "\x00", "A\u200b"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["armId", "tokenCost", "label"]), children, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = {
    "armId": st.sampled_from(["tool:x:a", "tool:x:b", "memory:m:c"]) | JSONISH,
    "tokenCost": st.sampled_from([0, 1, 2, True, False, 1.0, 2.5]) | JSONISH,
    "label": st.sampled_from(["", "Read", "x\ty"]) | JSONISH,
    "included": st.sampled_from([True, False, 1, 0]),
    "content": st.sampled_from([None, "text"]) | JSONISH,
    "arm_id": st.sampled_from(["tool:x:z"]),
}


@st.composite
def arrays(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly arrays whose items all have the same keys (the arrays that are cached)."""
    keys = draw(st.sets(st.sampled_from(sorted(FIELDS)), min_size=1))
    size = draw(st.integers(min_value=1, max_value=4))
    items = [{k: draw(FIELDS[k]) for k in sorted(keys)} for _ in range(size)]
    return items


EQUAL_KINDS: dict[Any, list[Any]] = {1: [1, True, 1.0], 0: [0, False, 0.0]}


@st.composite
def twins(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An array, and one equal to it (==) with some numbers of another kind (1, true, 1.0)."""
    first = draw(arrays())
    second = json.loads(json.dumps(first))
    for item in second:
        for key in ("tokenCost", "included"):
            value = item.get(key)
            if type(value) in (int, bool, float) and value in EQUAL_KINDS:
                item[key] = draw(st.sampled_from(EQUAL_KINDS[int(value)]))
    return first, second


def _outcome(fn: Any, data: Any) -> tuple[str, Any]:
    try:
        found = fn(data)
    except InvalidInput as exc:
        return type(exc).__name__, str(exc)
    return "ok", (found.ids, found.costs.tolist())


def _built_afresh(data: Any) -> ArmSet:
    return ArmSet(arms_from_json(data))


@settings(max_examples=400, deadline=None)
@given(pair=twins() | st.tuples(arrays(), arrays() | st.none()))
def test_for_json_reads_any_array_as_arms_from_json_does(
    pair: tuple[list[dict[str, Any]], list[dict[str, Any]] | None],
) -> None:
    """Any array, read after any other (or after itself), gives the ids and costs of an
    ArmSet built afresh from arms_from_json, or the same error."""
    first, second = pair
    cache = ArmSetCache()
    for data in (first, second if second is not None else first, first):
        copy = json.loads(json.dumps(data))
        assert _outcome(cache.for_json, copy) == _outcome(_built_afresh, data)


# --- the last alignment ---------------------------------------------------------------------


def _fresh(arm_set: ArmSet, posteriors: Any) -> list[list[float]]:
    arrays = align_posteriors(ArmSet(arm_set.arms), posteriors)
    return [arrays.alpha.tolist(), arrays.beta.tolist(), arrays.pulls.tolist()]


def _aligned(arm_set: ArmSet, posteriors: Any) -> list[list[float]]:
    arrays = align_posteriors(arm_set, posteriors)
    return [arrays.alpha.tolist(), arrays.beta.tolist(), arrays.pulls.tolist()]


def test_a_dict_changed_between_alignments_is_read_as_it_is_now() -> None:
    arm_set = ArmSet(arms(6))
    posteriors: dict[str, Any] = {a: Posterior(2.0, 3.0, 4) for a in arm_set.ids[:4]}
    for _ in range(3):
        assert _aligned(arm_set, posteriors) == _fresh(arm_set, posteriors)
    posteriors[arm_set.ids[1]] = Posterior(9.0, 1.0, 20)
    assert _aligned(arm_set, posteriors) == _fresh(arm_set, posteriors)
    posteriors["tool:x:not-an-arm"] = Posterior(5.0, 5.0, 5)
    assert _aligned(arm_set, posteriors) == _fresh(arm_set, posteriors)
    del posteriors[arm_set.ids[0]]
    assert _aligned(arm_set, posteriors) == _fresh(arm_set, posteriors)


def test_mutable_values_are_read_every_time() -> None:
    class Entry:
        def __init__(self) -> None:
            self.alpha, self.beta, self.pulls = 2.0, 2.0, 1

    arm_set = ArmSet(arms(3))
    entries = {a: Entry() for a in arm_set.ids}
    assert _aligned(arm_set, entries) == _aligned(arm_set, entries)
    entries[arm_set.ids[2]].alpha = 7.0
    entries[arm_set.ids[2]].pulls = 6
    assert _aligned(arm_set, entries)[0][2] == 7.0
    assert _aligned(arm_set, entries)[2][2] == 6


def test_a_bad_tuple_put_in_after_good_alignments_is_refused() -> None:
    arm_set = ArmSet(arms(8))
    posteriors: dict[str, Any] = dict.fromkeys(arm_set.ids, (2.0, 2.0, 1))
    align_posteriors(arm_set, posteriors)
    align_posteriors(arm_set, posteriors)
    posteriors[arm_set.ids[3]] = (2.0, -1.0, 1)
    with pytest.raises(InvalidInput):
        align_posteriors(arm_set, posteriors)
    posteriors[arm_set.ids[3]] = (2.0, 1.0, 2.5)
    with pytest.raises(InvalidInput):
        align_posteriors(arm_set, posteriors)


def test_aligned_arrays_are_the_callers_own() -> None:
    arm_set = ArmSet(arms(4))
    posteriors = {a: Posterior(2.0, 3.0, 4) for a in arm_set.ids}
    for _ in range(3):
        arrays = align_posteriors(arm_set, posteriors)
        assert arrays.alpha.tolist() == [2.0] * 4
        arrays.alpha[:] = 0.0
        arrays.pulls[:] = 99


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=9),
            st.none() | st.tuples(st.integers(1, 50), st.integers(1, 50), st.integers(0, 9)),
        ),
        max_size=25,
    ),
)
def test_any_sequence_of_changes_aligns_as_a_fresh_set_does(
    steps: list[tuple[int, tuple[int, int, int] | None]],
) -> None:
    """Posteriors replaced, removed and added one at a time, as Posterior objects or as
    tuples, between alignments of the same set."""
    inventory = [Arm(f"{'tool' if i % 2 else 'file'}:x:a{i}", 1) for i in range(8)]
    arm_set = ArmSet(inventory)
    ids = [*arm_set.ids, "tool:x:gone", "tool:x:other"]
    objects: dict[str, Any] = {}
    tuples: dict[str, Any] = {}
    for index, value in steps:
        key = ids[index]
        if value is None:
            objects.pop(key, None)
            tuples.pop(key, None)
        else:
            a, b, n = value
            objects[key] = Posterior(float(a), float(b), n)
            tuples[key] = (float(a), float(b), n)
        for mapping in (objects, tuples):
            got = _aligned(arm_set, mapping)
            assert got == _fresh(arm_set, mapping)
            assert np.isfinite(got[0]).all()
