"""Payload filters: which of the events a destination subscribes to it receives.

A filter is a JSON object in the syntax of Outpost's destination filters (and Hookdeck's
simple-json-match), evaluated against a document of four roots:

    {"type": "invoice.paid", "source": "api", "data": <the event's data>,
     "tenant": {"id": "acme", "metadata": {...}}}

`data` is the `data` of a `POST /v1/events` envelope, or the provider's whole body for an event
that came in through a source (shared/policy/forwarding.py marks those). A filter's keys are
field paths (`"data.amount"`, dotted or as nested objects: `{"data": {"amount": ...}}`; a
segment of digits indexes an array) or the logical operators `$and`, `$or` (lists) and `$not`.
A path's condition is a bare value (equal to it, or for an array field: the array contains it)
or an object of operators, all of which must hold:

    $eq $neq          equal / not equal (as a bare value; an object or array compares whole)
    $gt $gte $lt $lte a number with a number, a string with a string (else false)
    $in $nin          equal to one of a list (an array field: any element); a string operand:
                      the field is a string containing it
    $exist            true: the field is present (null counts); false: absent
    $startsWith $endsWith   the field is a string with that prefix / suffix
    $not $and $or     a condition negated / all / any of a list of conditions

A missing field fails every condition but `$exist: false` and the negations (`$neq`, `$nin`,
`$not`). Numbers compare by value (1 = 1.0); true is not 1.

:func:`check_filter` is the rule (InvalidSetting("filter") naming the bad operator or path);
:func:`compile_filter` turns a checked filter into a plain Python predicate once, so an event is
never matched by walking JSON: a destination's filter is compiled once per version
(:class:`FilterCache`), the event's body parsed once per event (:func:`event_document`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hookline.shared.errors import InvalidSetting
from hookline.shared.policy.inputs import json_kind

FIELD = "filter"
"""The field name a filter has in the admin API, the tenant API and the CLI."""
ROOTS = ("type", "source", "data", "tenant")
"""What a path may start with."""
TENANT_FIELDS = ("id", "metadata")
"""What a path under `tenant` may name next."""
VALUE_OPERATORS = frozenset({"$eq", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin",
                             "$exist", "$startsWith", "$endsWith"})
LOGICAL_OPERATORS = frozenset({"$and", "$or", "$not"})
OPERATORS = VALUE_OPERATORS | LOGICAL_OPERATORS
MAX_FILTER_BYTES = 16 * 1024
"""Longest filter, as compact JSON."""
MAX_CLAUSES = 256
"""Most conditions and operators in one filter (each costs time on every event it meets)."""
MAX_DEPTH = 32
"""Deepest nesting of a filter's objects and lists."""

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""What a path resolves to when the document has no such field."""

Document = Mapping[str, Any]
Predicate = Callable[[Document], bool]
_Test = Callable[[Any], bool]
_Path = tuple[str, ...]
_NUMBER = (int, float)


def _bad(detail: str) -> InvalidSetting:
    return InvalidSetting(FIELD, detail)


def _shown(path: _Path) -> str:
    return ".".join(path) or "the top level"


def check_filter(value: Any) -> dict[str, Any] | None:
    """Check a destination's filter.

    Args:
        value: the filter as decoded JSON; None or `{}` means no filter.

    Returns:
        The filter (a dict), or None for no filter.

    Raises:
        InvalidSetting("filter"): not an object, too large, or an unknown operator, a path
            outside the roots, or an operand of the wrong kind, naming the operator and path.
    """
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise _bad(f"must be a JSON object (or null for none), not {json_kind(value)}")
    _Compiler().node(value, ())  # first: it bounds the depth that json.dumps recurses into
    try:
        size = len(json.dumps(value, separators=(",", ":"), allow_nan=False))
    except ValueError:
        raise _bad("must hold finite numbers only (no NaN or Infinity)") from None
    if size > MAX_FILTER_BYTES:
        raise _bad(f"is {size} bytes as JSON; at most {MAX_FILTER_BYTES}")
    return value


def reads_tenant_metadata(value: Mapping[str, Any]) -> bool:
    """Whether a checked filter compares anything of the tenant's metadata: a path under
    `tenant.metadata`, or `tenant` itself (the whole object, metadata included). The
    metadata is the operator's: a filter a tenant gives must not test it, or its answers
    (which events match) would spell the values out."""
    compiler = _Compiler()
    compiler.node(dict(value), ())
    return any(path[:1] == ("tenant",) and path[1:2] != ("id",) for path in compiler.tested)


def compile_filter(value: Mapping[str, Any]) -> CompiledFilter:
    """A checked filter as a predicate over an event's document (see the module docstring).

    Args:
        value: a filter :func:`check_filter` accepts.

    Returns:
        The compiled filter.

    Raises:
        InvalidSetting("filter"): `value` breaks the rule (as :func:`check_filter`).
    """
    compiler = _Compiler()
    predicate = compiler.node(dict(value), ())
    return CompiledFilter(predicate=predicate, roots=frozenset(compiler.roots),
                          clauses=compiler.clauses)


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    """A filter ready to run: `predicate(document)`; `roots` are the document roots it reads
    (an event's body is parsed only when `data` is among them, the tenant's metadata read only
    when `tenant` is); `clauses` counts its conditions and operators."""

    predicate: Predicate
    roots: frozenset[str]
    clauses: int


class FilterCache:
    """Compiled filters by (destination id, filter text): a destination's filter is compiled
    the first time its current text is met, and again only after it changes. Bounded (least
    recently used out first), so it needs no invalidation: a changed filter is a new key."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._found: OrderedDict[tuple[int, str], CompiledFilter] = OrderedDict()

    def get(self, destination_id: int, text: str) -> CompiledFilter:
        """The compiled filter of a destination whose stored filter is `text` (JSON).

        Raises:
            InvalidSetting: the stored text is not a valid filter (written around the rule).
        """
        key = (destination_id, text)
        found = self._found.get(key)
        if found is None:
            found = compile_filter(json.loads(text))
            self._found[key] = found
            if len(self._found) > self._size:
                self._found.popitem(last=False)
        else:
            self._found.move_to_end(key)
        return found


def event_data(body: bytes, from_source: bool) -> Any:
    """The `data` root of an event's document: the envelope's `data` (events posted to
    POST /v1/events), or the whole body for an event from an inbound source; MISSING when the
    body is not JSON (a provider may send anything)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return MISSING
    if from_source:
        return parsed
    return parsed.get("data", MISSING) if isinstance(parsed, dict) else MISSING


def event_document(*, event_type: str, source: str, data: Any, tenant: str = "",
                   metadata: Any = None) -> dict[str, Any]:
    """The document a filter reads (see the module docstring); `data` MISSING leaves it out,
    `metadata` is the tenant's (None: {})."""
    doc: dict[str, Any] = {"type": event_type, "source": source,
                           "tenant": {"id": tenant, "metadata": metadata or {}}}
    if data is not MISSING:
        doc["data"] = data
    return doc


# -- the compiler ---------------------------------------------------------------------------


class _Compiler:
    """Checks a filter and builds its predicate in one walk (so what is checked is what runs)."""

    def __init__(self) -> None:
        self.roots: set[str] = set()
        self.tested: set[_Path] = set()  # the paths a value is compared at
        self.clauses = 0
        self._depth = 0

    def _count(self, path: _Path) -> None:
        self.clauses += 1
        if self.clauses > MAX_CLAUSES:
            raise _bad(f"has more than {MAX_CLAUSES} conditions and operators (at "
                       f"{_shown(path)})")

    def node(self, spec: Any, path: _Path) -> Predicate:
        """A filter (`path` empty) or the condition on the field at `path`."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _bad(f"nests deeper than {MAX_DEPTH} levels at {_shown(path)}")
            if isinstance(spec, dict):
                return self._object(spec, path)
            if not path:
                raise _bad(f"must be a JSON object, not {json_kind(spec)}")
            self._count(path)
            self.tested.add(path)
            return _on(path, _equal_test(spec))
        finally:
            self._depth -= 1

    def _object(self, spec: dict[str, Any], path: _Path) -> Predicate:
        if not spec:
            raise _bad(f"empty object at {_shown(path)}: give a condition (`$exist: true` "
                       "asks only that the field is present)")
        operators = [k for k in spec if isinstance(k, str) and k.startswith("$")]
        fields = [k for k in spec if k not in operators]
        for op in operators:
            if op not in OPERATORS:
                raise _bad(f"unknown operator {op!r} at {_shown(path)}; the operators are "
                           f"{' '.join(sorted(OPERATORS))}")
        value_ops = [op for op in operators if op in VALUE_OPERATORS]
        if value_ops and not path:
            raise _bad(f"operator {value_ops[0]!r} needs a field path (e.g. "
                       f"{{\"data.amount\": {{\"{value_ops[0]}\": ...}}}})")
        if value_ops and fields:
            raise _bad(f"at {_shown(path)}, operator {value_ops[0]!r} is mixed with field "
                       f"{fields[0]!r}; put the field's condition in a path of its own")
        parts: list[Predicate] = []
        for key in fields:
            parts.append(self.node(spec[key], self._path(path, key)))
        for op in operators:
            parts.append(self._operator(op, spec[op], path))
        return _all(parts)

    def _path(self, path: _Path, key: str) -> _Path:
        segments = tuple(key.split("."))
        full = path + segments
        if any(not s for s in segments):
            raise _bad(f"empty segment in path {_shown(full)!r}")
        root = full[0]
        if root not in ROOTS:
            raise _bad(f"unknown path {_shown(full)!r}: a path starts with one of "
                       f"{', '.join(ROOTS)}")
        if root in ("type", "source") and len(full) > 1:
            raise _bad(f"unknown path {_shown(full)!r}: {root} is a string, it has no fields")
        if root == "tenant" and len(full) > 1 and full[1] not in TENANT_FIELDS:
            raise _bad(f"unknown path {_shown(full)!r}: tenant has "
                       f"{' and '.join(TENANT_FIELDS)}")
        if root == "tenant" and len(full) > 2 and full[1] == "id":
            raise _bad(f"unknown path {_shown(full)!r}: tenant.id is a string, it has no fields")
        self.roots.add(root)
        return full

    def _operator(self, op: str, operand: Any, path: _Path) -> Predicate:
        self._count(path)
        where = f"{op} at {_shown(path)}"
        if op in ("$and", "$or"):
            if not isinstance(operand, list) or not operand:
                raise _bad(f"{where} takes a non-empty list, not {json_kind(operand)}")
            parts = [self.node(item, path) for item in operand]
            return _all(parts) if op == "$and" else _any(parts)
        if op == "$not":
            if not path and not isinstance(operand, dict):
                raise _bad(f"{where} takes a filter object, not {json_kind(operand)}")
            inner = self.node(operand, path)
            return lambda doc: not inner(doc)
        self.tested.add(path)
        return _on(path, _value_test(op, operand, where))


def _value_test(op: str, operand: Any, where: str) -> _Test:
    """The test one value operator makes of a field's value (MISSING when absent)."""
    if op in ("$eq", "$neq"):
        test = _equal_test(operand)
        return test if op == "$eq" else _negated(test)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return _order_test(op, operand, where)
    if op in ("$in", "$nin"):
        test = _in_test(operand, where)
        return test if op == "$in" else _negated(test)
    if op == "$exist":
        if not isinstance(operand, bool):
            raise _bad(f"{where} takes true or false, not {json_kind(operand)}")
        return (lambda v: v is not MISSING) if operand else (lambda v: v is MISSING)
    if not isinstance(operand, str):  # $startsWith, $endsWith
        raise _bad(f"{where} takes a string, not {json_kind(operand)}")
    if op == "$startsWith":
        return lambda v: type(v) is str and v.startswith(operand)
    return lambda v: type(v) is str and v.endswith(operand)


def _negated(test: _Test) -> _Test:
    return lambda v: not test(v)


def _order_test(op: str, operand: Any, where: str) -> _Test:
    if type(operand) is str:
        kinds: tuple[type, ...] = (str,)
    elif type(operand) in _NUMBER:
        kinds = _NUMBER
    else:
        raise _bad(f"{where} takes a number or a string, not {json_kind(operand)}")
    if op == "$gt":
        return lambda v: type(v) in kinds and v > operand
    if op == "$gte":
        return lambda v: type(v) in kinds and v >= operand
    if op == "$lt":
        return lambda v: type(v) in kinds and v < operand
    return lambda v: type(v) in kinds and v <= operand


def _equal_test(operand: Any) -> _Test:
    """Equal to `operand` (JSON equality); a scalar also matches an array containing it."""
    kind = type(operand)
    if kind is str:
        return lambda v: v == operand if type(v) is str else (
            type(v) is list and operand in v)
    if kind is bool or operand is None:
        return lambda v: v is operand or (type(v) is list and any(e is operand for e in v))
    if kind in _NUMBER:
        return lambda v: (type(v) in _NUMBER and v == operand) or (
            type(v) is list and any(type(e) in _NUMBER and e == operand for e in v))
    return lambda v: json_equal(v, operand)


def _in_test(operand: Any, where: str) -> _Test:
    if type(operand) is str:
        return lambda v: type(v) is str and operand in v
    if not isinstance(operand, list):
        raise _bad(f"{where} takes a list (or a string: contains), not {json_kind(operand)}")
    strings = frozenset(m for m in operand if type(m) is str)
    numbers = frozenset(m for m in operand if type(m) in _NUMBER)
    others = [_equal_test(m) for m in operand
              if type(m) is not str and type(m) not in _NUMBER]

    def member(v: Any) -> bool:
        kind = type(v)
        if kind is str:
            return v in strings
        if kind in _NUMBER:
            return v in numbers
        if kind is list and any(
                (type(e) is str and e in strings) or (type(e) in _NUMBER and e in numbers)
                for e in v):
            return True
        return any(test(v) for test in others)
    return member


def _on(path: _Path, test: _Test) -> Predicate:
    """A predicate applying `test` to the field at `path` (specialised for short paths)."""
    if len(path) == 1:
        [a] = path
        return lambda doc: test(doc.get(a, MISSING))
    if len(path) == 2:
        a, b = path

        def two(doc: Document) -> bool:
            v = doc.get(a, MISSING)
            return test(v.get(b, MISSING) if type(v) is dict else _step(v, b))
        return two
    return lambda doc: test(resolve(doc, path))


def _all(parts: Sequence[Predicate]) -> Predicate:
    """All of `parts`, short-circuit; unrolled for few parts (a generator per call costs
    more than the conditions themselves)."""
    if not parts:
        return lambda doc: True
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        a, b = parts
        return lambda doc: a(doc) and b(doc)
    if len(parts) == 3:
        a, b, c = parts
        return lambda doc: a(doc) and b(doc) and c(doc)
    head, rest = _all(parts[:3]), _all(parts[3:])
    return lambda doc: head(doc) and rest(doc)


def _any(parts: Sequence[Predicate]) -> Predicate:
    """Any of `parts`, short-circuit (unrolled as :func:`_all`)."""
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        a, b = parts
        return lambda doc: a(doc) or b(doc)
    if len(parts) == 3:
        a, b, c = parts
        return lambda doc: a(doc) or b(doc) or c(doc)
    head, rest = _any(parts[:3]), _any(parts[3:])
    return lambda doc: head(doc) or rest(doc)


def _step(value: Any, segment: str) -> Any:
    if type(value) is dict:
        return value.get(segment, MISSING)
    if type(value) is list and segment.isdigit():
        index = int(segment)
        return value[index] if index < len(value) else MISSING
    return MISSING


def resolve(doc: Any, path: Sequence[str]) -> Any:
    """The value at `path` in `doc` (objects by key, arrays by a digits segment), or MISSING."""
    value = doc
    for segment in path:
        value = _step(value, segment)
        if value is MISSING:
            return MISSING
    return value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: same kind and value; numbers by value, true is not 1."""
    if type(a) in _NUMBER and type(b) in _NUMBER:
        return bool(a == b)
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)
