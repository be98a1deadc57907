"""The compiled payload filter (shared/policy/filters.py) against a plain reference: an
interpreter that walks the filter JSON for every document, written from the rules in the
module docstring and nothing else. Random documents and filters must get the same answer from
both; plus worked cases of each operator, and the rule's refusals naming operator and path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.shared.errors import InvalidSetting
from hookline.shared.policy.filters import (
    MISSING,
    check_filter,
    compile_filter,
    event_data,
    event_document,
)

PROPERTY = settings(max_examples=200, derandomize=True, database=None, deadline=None)

# -- the reference -----------------------------------------------------------------------------


def ref_get(doc: Any, path: list[str]) -> Any:
    for segment in path:
        if isinstance(doc, dict):
            if segment not in doc:
                return MISSING
            doc = doc[segment]
        elif isinstance(doc, list) and segment.isdigit() and int(segment) < len(doc):
            doc = doc[int(segment)]
        else:
            return MISSING
    return doc


def ref_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


def ref_same(a: Any, b: Any) -> bool:
    if ref_kind(a) != ref_kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(ref_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(ref_same(a[k], b[k]) for k in a)
    return bool(a == b)


def ref_eq(v: Any, x: Any) -> bool:
    if ref_same(v, x):
        return True
    scalar = not isinstance(x, list | dict)
    return scalar and isinstance(v, list) and any(ref_same(e, x) for e in v)


def ref_value_op(op: str, v: Any, x: Any) -> bool:
    if op == "$eq":
        return ref_eq(v, x)
    if op == "$neq":
        return not ref_eq(v, x)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if ref_kind(v) != ref_kind(x) or ref_kind(v) not in ("number", "str"):
            return False
        return {"$gt": v > x, "$gte": v >= x, "$lt": v < x, "$lte": v <= x}[op]
    if op in ("$in", "$nin"):
        if isinstance(x, str):
            found = isinstance(v, str) and x in v
        else:
            found = any(ref_eq(v, m) for m in x)
        return found if op == "$in" else not found
    if op == "$exist":
        return (v is not MISSING) == x
    if op == "$startsWith":
        return isinstance(v, str) and v.startswith(x)
    assert op == "$endsWith"
    return isinstance(v, str) and v.endswith(x)


def ref_match(spec: Any, doc: Any, path: list[str]) -> bool:
    if not isinstance(spec, dict):
        return ref_eq(ref_get(doc, path), spec)
    for key, operand in spec.items():
        if key == "$and":
            ok = all(ref_match(s, doc, path) for s in operand)
        elif key == "$or":
            ok = any(ref_match(s, doc, path) for s in operand)
        elif key == "$not":
            ok = not ref_match(operand, doc, path)
        elif key.startswith("$"):
            ok = ref_value_op(key, ref_get(doc, path), operand)
        else:
            ok = ref_match(operand, doc, path + key.split("."))
        if not ok:
            return False
    return True


# -- random documents and filters ---------------------------------------------------------------

KEYS = ["a", "b", "c", "0", "1"]
scalars = (st.none() | st.booleans() | st.integers(-2, 2)
           | st.floats(-3, 3, allow_nan=False).map(lambda f: round(f, 1))
           | st.sampled_from(["", "x", "xy", "yx", "ab", "b"]))
values = st.recursive(scalars, lambda children: st.lists(children, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
                      max_leaves=12)
documents = st.fixed_dictionaries({
    "type": st.sampled_from(["a.b", "a.c", "x"]), "source": st.sampled_from(["api", "gh"]),
    "data": st.fixed_dictionaries({"a": values, "b": values},
                                  optional={"c": values, "0": values}) | values,
    "tenant": st.fixed_dictionaries({"id": st.sampled_from(["t1", "t2"]),
                                     "metadata": st.dictionaries(st.sampled_from(KEYS),
                                                                 values, max_size=3)})})
paths = st.sampled_from(["type", "source", "data", "data.a", "data.a.b", "data.0", "data.a.0",
                         "data.b.c.a", "tenant.id", "tenant.metadata.a",
                         "tenant.metadata.b.0"])
strings = st.sampled_from(["", "x", "y", "ab", "a.b", "a"])
numbers = st.integers(-2, 2) | st.floats(-2, 2, allow_nan=False).map(lambda f: round(f, 1))


def value_operators() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda op, x: {op: x}, st.sampled_from(["$eq", "$neq"]), values),
        st.builds(lambda op, x: {op: x}, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
                  numbers | strings),
        st.builds(lambda op, x: {op: x}, st.sampled_from(["$in", "$nin"]),
                  st.lists(values, max_size=4) | strings),
        st.builds(lambda x: {"$exist": x}, st.booleans()),
        st.builds(lambda op, x: {op: x}, st.sampled_from(["$startsWith", "$endsWith"]),
                  strings))


conditions = st.recursive(
    values | value_operators(),
    lambda inner: st.builds(lambda x: {"$not": x}, inner)
    | st.builds(lambda op, xs: {op: xs}, st.sampled_from(["$and", "$or"]),
                st.lists(inner, min_size=1, max_size=3)),
    max_leaves=4)
def _merged(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several filters as one object (their keys ANDed)."""
    return {k: v for spec in specs for k, v in spec.items()}


clauses = st.builds(lambda p, c: {p: c}, paths, conditions)
filters = st.recursive(
    clauses,
    lambda inner: st.builds(lambda x: {"$not": x}, inner)
    | st.builds(lambda op, xs: {op: xs}, st.sampled_from(["$and", "$or"]),
                st.lists(inner, min_size=1, max_size=3))
    | st.lists(inner, min_size=2, max_size=3).map(_merged),
    max_leaves=6)


def _valid(spec: dict[str, Any]) -> bool:
    try:
        check_filter(spec)
    except InvalidSetting:
        return False
    return True


@PROPERTY
@given(filters.filter(_valid), st.lists(documents, min_size=1, max_size=5))
def test_the_compiled_filter_answers_as_the_reference(spec: dict[str, Any],
                                                      docs: list[dict[str, Any]]) -> None:
    compiled = compile_filter(spec)
    for doc in docs:
        assert compiled.predicate(doc) == ref_match(spec, doc, []), (spec, doc)


@PROPERTY
@given(filters.filter(_valid), documents)
def test_a_document_without_data_is_matched_as_the_reference(spec: dict[str, Any],
                                                             doc: dict[str, Any]) -> None:
    del doc["data"]
    assert compile_filter(spec).predicate(doc) == ref_match(spec, doc, [])


single_conditions = st.builds(lambda path, cond: {path: cond},
                              st.sampled_from(["data.a", "data.b", "data.a.0", "tenant.id"]),
                              value_operators() | scalars | st.lists(scalars, max_size=2))
flat_documents = st.fixed_dictionaries({
    "type": st.just("a.b"), "source": st.just("api"),
    "data": st.fixed_dictionaries({"a": scalars | st.lists(scalars, max_size=3),
                                   "b": scalars | st.sampled_from(["x", "xy", "ab"])}),
    "tenant": st.fixed_dictionaries({"id": st.sampled_from(["", "x", "ab"]),
                                     "metadata": st.just({})})})


@settings(max_examples=600, derandomize=True, database=None, deadline=None)
@given(single_conditions.filter(_valid), st.lists(flat_documents, min_size=3, max_size=8))
def test_each_operator_answers_as_the_reference_at_its_boundaries(
        spec: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """One condition over fields that exist, operands and values from one small pool, so
    equal values (the boundary of every comparison) and kinds that differ meet often."""
    compiled = compile_filter(spec)
    for doc in docs:
        assert compiled.predicate(doc) == ref_match(spec, doc, []), (spec, doc)


# -- worked cases ----------------------------------------------------------------------------------

DOC = event_document(event_type="invoice.paid", source="api",
                     data={"amount": 1500, "currency": "EUR", "tags": ["vip", "eu"],
                           "customer": {"email": "a@example.com", "tier": "pro"},
                           "lines": [{"sku": "x1"}], "deleted_at": None},
                     tenant="acme", metadata={"region": "eu", "plan": {"seats": 5}})


@pytest.mark.parametrize(("spec", "expected"), [
    ({"data": {"amount": {"$gte": 1000}}}, True),
    ({"data.amount": {"$gt": 1500}}, False),
    ({"data.amount": {"$gte": 100, "$lt": 500}}, False),
    ({"data.currency": "EUR"}, True),
    ({"data.amount": "1500"}, False),  # a string is not a number
    ({"data.tags": "vip"}, True),  # array contains
    ({"data.tags": {"$in": ["us", "eu"]}}, True),
    ({"data.tags": {"$nin": ["us"]}}, True),
    ({"data.tags": ["vip", "eu"]}, True),
    ({"data.tags": ["eu", "vip"]}, False),
    ({"data.customer.email": {"$endsWith": "@example.com"}}, True),
    ({"data.customer": {"tier": {"$startsWith": "p"}, "email": {"$exist": True}}}, True),
    ({"data.customer.phone": {"$exist": False}}, True),
    ({"data.deleted_at": {"$exist": True}}, True),  # null is present
    ({"data.deleted_at": None}, True),
    ({"data.lines.0.sku": "x1"}, True),
    ({"data.customer.email": {"$in": "example"}}, True),  # a string operand: contains
    ({"data.missing": {"$neq": 1}}, True),
    ({"data.missing": {"$gt": 0}}, False),
    ({"type": {"$startsWith": "invoice."}, "source": "api"}, True),
    ({"tenant.metadata.region": "eu", "tenant.id": "acme"}, True),
    ({"tenant": {"metadata": {"plan.seats": {"$lte": 5}}}}, True),
    ({"$or": [{"data.currency": "USD"}, {"data.amount": {"$gte": 1000}}]}, True),
    ({"$and": [{"data.currency": "EUR"}, {"data.amount": {"$lt": 1000}}]}, False),
    ({"$not": {"data.currency": "EUR"}}, False),
    ({"data.currency": {"$not": {"$in": ["USD", "GBP"]}}}, True),
    ({"data.amount": {"$or": [{"$lt": 10}, {"$gt": 1000}]}}, True),
    ({"data.amount": True}, False),
])
def test_worked_cases(spec: dict[str, Any], expected: bool) -> None:
    assert compile_filter(check_filter(spec) or {}).predicate(DOC) is expected
    assert ref_match(spec, DOC, []) is expected


@pytest.mark.parametrize(("spec", "named"), [
    ({"data.amount": {"$gtx": 1}}, "'$gtx' at data.amount"),
    ({"payload.amount": 1}, "'payload.amount'"),
    ({"data..amount": 1}, "'data..amount'"),
    ({"type.name": "x"}, "'type.name'"),
    ({"tenant.name": "x"}, "'tenant.name'"),
    ({"data.amount": {"$gt": [1]}}, "$gt at data.amount"),
    ({"data.amount": {"$in": 3}}, "$in at data.amount"),
    ({"data.x": {"$exist": "yes"}}, "$exist at data.x"),
    ({"data.x": {"$startsWith": 1}}, "$startsWith at data.x"),
    ({"$or": []}, "$or at the top level"),
    ({"$or": {"data.a": 1}}, "$or at the top level"),
    ({"$eq": 1}, "'$eq' needs a field path"),
    ({"data": {"$gt": 1, "a": 2}}, "'$gt' is mixed with field 'a'"),
    ({"data.x": {}}, "empty object at data.x"),
    ([1], "must be a JSON object"),
    ({"data.x": float("nan")}, "finite numbers"),
])
def test_the_rule_names_the_bad_operator_or_path(spec: Any, named: str) -> None:
    with pytest.raises(InvalidSetting) as caught:
        check_filter(spec)
    assert caught.value.field == "filter"
    assert named in str(caught.value)


def test_no_filter_is_none() -> None:
    assert check_filter(None) is None
    assert check_filter({}) is None


def test_event_data_reads_the_envelope_or_a_source_body() -> None:
    assert event_data(b'{"id":"1","type":"t","data":{"a":1}}', from_source=False) == {"a": 1}
    assert event_data(b'{"action":"opened"}', from_source=True) == {"action": "opened"}
    assert event_data(b"not json", from_source=True) is MISSING
    assert event_data(b"[1]", from_source=False) is MISSING
