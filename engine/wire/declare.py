"""How a wire type is declared, and what is derived from a declaration.

A wire type is a frozen dataclass decorated with `wire_type`; each field's `wire(...)` gives
its JSON name (the Python name when none is given), the other names a request body may use
for it, its description, its bounds as OpenAPI keywords (`maxLength=256`, `minimum=0`), and
how a client sends it. From that one declaration come:

- `schema_of`: its OpenAPI 3.0 schema (`components.schemas` of the HTTP API);
- `body_names` / `nested_types`: the fields a request body may hold (the HTTP body check);
- `encode` / `decode`: the JSON object of a value and the value of a JSON object (the
  Python client's models are the declared types themselves);
- `answer_of`: a wire type's JSON object read from any object with the same attribute names
  (an engine result), for the answers the server sends.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any, Literal, Self, TypeVar

T = TypeVar("T")

Send = Literal["always", "changed", "truthy"]
"""When `encode` writes a field: always; only when it differs from its default (the
default); only when it is truthy (an empty context is left out)."""


@dataclass(frozen=True, slots=True)
class Spec:
    """What `wire(...)` declares about one field."""

    name: str | None
    aliases: tuple[str, ...]
    description: str | None
    required: bool | None
    nullable: bool | None
    send: Send
    client: bool
    shape: type[Any] | None
    empty_is_null: bool
    keywords: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WireField:
    """One field of a wire type, resolved: its Python and JSON names, type and spec."""

    py: str
    json: str
    type: Any
    spec: Spec
    default: Any
    """The field's default (MISSING when it has none; a factory's value otherwise)."""


def wire(
    name: str | None = None,
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    aliases: Sequence[str] = (),
    doc: str | None = None,
    required: bool | None = None,
    nullable: bool | None = None,
    send: Send = "changed",
    client: bool = False,
    shape: type[Any] | None = None,
    empty_is_null: bool = False,
    **keywords: Any,
) -> Any:
    """A field of a wire type. `name`: its JSON name; `aliases`: other names a request body
    may give it; `doc`: its description; `required`: whether the schema requires it (default:
    when it has no default); `nullable`: whether the schema allows null (default: when its
    type allows None); `client`: a field only the client keeps (not on the wire); `shape`: the
    wire type of a value kept as a plain mapping; `empty_is_null`: the server sends an empty
    value as null; `keywords`: OpenAPI keywords (bounds, enum...)."""
    spec = Spec(
        name,
        tuple(aliases),
        doc,
        required,
        nullable,
        send,
        client,
        shape,
        empty_is_null,
        dict(keywords),
    )
    metadata = {"wire": spec}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


PHASES = ["passive", "active"]
"""The learner's phases, as every type that names one lists them."""

_NAMES: dict[type[Any], str] = {}
_TOLERATED: dict[type[Any], frozenset[str]] = {}
_REQUIRED: dict[type[Any], Sequence[str] | Literal["all"] | None] = {}
REGISTRY: dict[str, type[Any]] = {}
"""Every wire type by its schema name, in the order declared."""
DOCUMENTED: dict[str, type[Any]] = {}
"""The wire types of the learning API's OpenAPI document (`components.schemas`)."""


def wire_type(
    name: str | None = None,
    *,
    tolerated: Sequence[str] = (),
    required: Sequence[str] | Literal["all"] | None = None,
    documented: bool = True,
) -> Callable[[type[T]], type[T]]:
    """Register a wire type (a dataclass) under its schema `name` (default: the class name).
    `tolerated`: fields a request body may hold that are accepted and ignored (sent by the
    original clients); `required`: the JSON names the schema requires, or "all" (default:
    each field's own `required`); `documented`: whether the learning API's OpenAPI document
    lists it (the gateway's tool arguments are not its routes')."""

    def register(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        schema_name = name or cls.__name__
        if schema_name in REGISTRY:
            raise ValueError(f"wire type {schema_name!r} is declared twice")
        _NAMES[cls] = schema_name
        _TOLERATED[cls] = frozenset(tolerated)
        _REQUIRED[cls] = required
        REGISTRY[schema_name] = cls
        if documented:
            DOCUMENTED[schema_name] = cls
        return cls

    return register


def schema_name(cls: type[Any]) -> str:
    return _NAMES[cls]


def tolerated(cls: type[Any]) -> frozenset[str]:
    return _TOLERATED[cls]


def is_wire_type(value: Any) -> bool:
    return isinstance(value, type) and value in _NAMES


_PLAIN = Spec(None, (), None, None, None, "changed", False, None, False, {})


_FIELDS: dict[type[Any], tuple[WireField, ...]] = {}
_SENT: dict[type[Any], tuple[WireField, ...]] = {}
_SCHEMAS: dict[type[Any], dict[str, Any]] = {}


def wire_fields(cls: type[Any]) -> tuple[WireField, ...]:
    """The declared fields of `cls`, client-only ones included, in declaration order."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _resolve(cls)
    return found


def _resolve(cls: type[Any]) -> tuple[WireField, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("wire", _PLAIN)
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        out.append(WireField(f.name, spec.name or f.name, hints[f.name], spec, default))
    return tuple(out)


def sent_fields(cls: type[Any]) -> tuple[WireField, ...]:
    """The fields that go on the wire (not the client's own)."""
    found = _SENT.get(cls)
    if found is None:
        found = _SENT[cls] = tuple(f for f in wire_fields(cls) if not f.spec.client)
    return found


def json_names(cls: type[Any]) -> dict[str, str]:
    """{python name: JSON name} of the fields on the wire."""
    return {f.py: f.json for f in sent_fields(cls)}


# -- types -----------------------------------------------------------------------------------


def _optional(tp: Any) -> tuple[Any, bool]:
    """(`tp` without None, whether it allowed None)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            inner = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
            return inner, True
    return tp, False


def _item_type(tp: Any) -> Any | None:
    """The item type of a sequence type (tuple[T, ...], list[T], Sequence[T]), else None."""
    origin = typing.get_origin(tp)
    if origin in (tuple, list, Sequence, typing.Sequence):
        args = typing.get_args(tp)
        return args[0] if args else Any
    return None


def _value_type(tp: Any) -> Any | None:
    """The value type of a mapping type, else None."""
    if typing.get_origin(tp) in (dict, Mapping, typing.Mapping):
        args = typing.get_args(tp)
        return args[1] if len(args) == 2 else Any
    return None


# -- OpenAPI ---------------------------------------------------------------------------------


def _ref(cls: type[Any]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{_NAMES[cls]}"}


def _type_schema(tp: Any, shape: type[Any] | None = None) -> dict[str, Any]:
    if tp is Any:
        return {}
    if shape is not None and _value_type(tp) is not None:
        return schema_of(shape)
    if is_wire_type(tp):
        return _ref(tp)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if typing.get_origin(tp) is Literal:
        values = list(typing.get_args(tp))
        return {**_type_schema(type(values[0])), "enum": values}
    item = _item_type(tp)
    if item is not None:
        if shape is not None:
            return {"type": "array", "items": schema_of(shape)}
        return {"type": "array", "items": _type_schema(item)}
    value = _value_type(tp)
    if value is not None:
        if value is Any:
            return {"type": "object"}
        return {"type": "object", "additionalProperties": _type_schema(value)}
    raise TypeError(f"no schema for the type {tp!r}")


def field_schema(f: WireField) -> dict[str, Any]:
    """The schema of one field: its type's, its bounds, whether null is allowed, its
    description."""
    tp, optional = _optional(f.type)
    schema = _type_schema(tp, f.spec.shape)
    nullable = optional if f.spec.nullable is None else f.spec.nullable
    if "$ref" in schema and (nullable or f.spec.keywords or f.spec.description):
        schema = schema_of(tp)  # a reference takes no keywords beside it (OpenAPI 3.0)
    schema = dict(schema)
    schema.update(f.spec.keywords)
    if nullable:
        schema["nullable"] = True
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
    if f.spec.description:
        schema["description"] = f.spec.description
    return schema


def is_required(f: WireField) -> bool:
    return f.default is MISSING if f.spec.required is None else f.spec.required


def _schema(cls: type[Any]) -> dict[str, Any]:
    found = _SCHEMAS.get(cls)
    if found is None:
        found = _SCHEMAS[cls] = _build_schema(cls)
    return found


def _build_schema(cls: type[Any]) -> dict[str, Any]:
    fields = sent_fields(cls)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.json: field_schema(f) for f in fields},
    }
    listed = _REQUIRED[cls]
    if listed == "all":
        required = [f.json for f in fields]
    elif listed is not None:
        required = list(listed)
    else:
        required = [f.json for f in fields if is_required(f)]
    if required:
        schema["required"] = required
    return schema


def schema_of(cls: type[Any]) -> dict[str, Any]:
    """The OpenAPI 3.0 schema of a wire type (a fresh copy)."""
    import copy

    return copy.deepcopy(_schema(cls))


# -- request bodies --------------------------------------------------------------------------


def body_names(cls: type[Any]) -> tuple[str, ...]:
    """The names a request body may give the fields of `cls`: each JSON name and alias."""
    return tuple(name for f in sent_fields(cls) for name in (f.json, *f.spec.aliases))


def nested_types(cls: type[Any]) -> dict[str, type[Any]]:
    """The fields (each name a body may give them) whose value is a wire type or a list of
    one, with that type: what the body check looks into."""
    out: dict[str, type[Any]] = {}
    for f in sent_fields(cls):
        tp, _ = _optional(f.type)
        item = _item_type(tp)
        inner = f.spec.shape or (tp if item is None else item)
        if is_wire_type(inner):
            for name in (f.json, *f.spec.aliases):
                out[name] = inner
    return out


# -- values ----------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A value as JSON holds it: wire types encoded, sequences as lists, mappings as dicts,
    enumerations as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def encode(
    value: Any, *, skip: frozenset[str] = frozenset(), always: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The JSON object of a wire value, each field as its `send` says (`skip`: Python names
    left out; `always`: Python names written whatever their value)."""
    out: dict[str, Any] = {}
    for f in sent_fields(type(value)):
        if f.py in skip:
            continue
        item = getattr(value, f.py)
        if f.py not in always:
            send = f.spec.send
            if send == "changed" and f.default is not MISSING and item == f.default:
                continue
            if send == "truthy" and not item:
                continue
        out[f.json] = plain(item)
    return out


def decode(cls: type[T], data: Any, **extra: Any) -> T:
    """A wire value from its JSON object: fields it leaves out keep their defaults, unknown
    ones are ignored; nested wire types are decoded, arrays become tuples where the field is
    a tuple. `extra`: the client-only fields. Raises ValueError when `data` is no object."""
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for f in sent_fields(cls):
        if f.json not in data:
            continue
        kwargs[f.py] = _decoded(f.type, data[f.json])
    return cls(**kwargs, **extra)


class Answer:
    """A wire type a client reads from an answer: `from_json` decodes it (see `decode`)."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        return decode(cls, data)


def _decoded(tp: Any, value: Any) -> Any:
    tp, _ = _optional(tp)
    if value is None:
        return None
    if is_wire_type(tp):
        return decode(tp, value)
    if typing.get_origin(tp) is tuple and isinstance(value, list):
        item = _item_type(tp)
        return tuple(_decoded(item, v) for v in value)
    return value


def arguments(cls: type[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments (Python names) a JSON object gives the fields of `cls`: each one
    it leaves out takes its default, or None when it has none (the receiver says it is
    missing)."""
    return {
        f.py: data.get(f.json, None if f.default is MISSING else f.default)
        for f in sent_fields(cls)
    }


# -- answers ---------------------------------------------------------------------------------

Encoder = Callable[[Any], dict[str, Any]]
_ENCODERS: dict[type[Any], Encoder] = {}


def answer_encoder(cls: type[Any]) -> Encoder:
    """The function writing the JSON object of `cls` from any object with attributes of the
    same Python names (an engine result): what the server answers. Every field is written, in
    the declared order; a field of a wire type (or a list of them) is written by that type's
    encoder, an enumeration (in a field declared with an `enum`) as its value."""
    found = _ENCODERS.get(cls)
    if found is None:
        found = _ENCODERS[cls] = _encoder(cls)
    return found


def answer_of(cls: type[Any], source: Any) -> dict[str, Any]:
    """`answer_encoder(cls)(source)`."""
    return answer_encoder(cls)(source)


def _expression(f: WireField, env: dict[str, Any], source: str = "s") -> str:
    """The Python expression writing field `f` of `source` (names it needs go into `env`)."""
    read = f"{source}.{f.py}"
    tp, _ = _optional(f.type)
    item = _item_type(tp)
    value = _value_type(tp)
    if is_wire_type(tp):
        env[f"_{_NAMES[tp]}"] = answer_encoder(tp)
        return f"(None if (_v := {read}) is None else _{_NAMES[tp]}(_v))"
    if item is not None and is_wire_type(item):  # written in place: runs carry many arms
        inner = source + "_"
        return f"[{_display(item, env, inner)} for {inner} in {read}]"
    if item is not None:
        return f"list({read})"
    if value is not None and _item_type(value) is not None:
        return f"{{k: list(i) for k, i in {read}.items()}}"
    if value is not None:
        return f"(None if (_v := {read}) is None else dict(_v))"
    if "enum" in f.spec.keywords:  # the source may hold an enumeration: its value
        read = f"(_v.value if isinstance(_v := {read}, _Enum) else _v)"
    return f"({read} or None)" if f.spec.empty_is_null else read


def _display(cls: type[Any], env: dict[str, Any], source: str) -> str:
    """The dict display writing the fields of `cls` from `source`."""
    items = ", ".join(f"{f.json!r}: {_expression(f, env, source)}" for f in sent_fields(cls))
    return f"{{{items}}}"


def _encoder(cls: type[Any]) -> Encoder:
    """A function written for `cls`: one dict display reading each attribute (as fast as one
    written by hand, on the paths that answer every select, observe and trace)."""
    env: dict[str, Any] = {"_Enum": enum.Enum}
    source = f"def encode_answer(s):\n    return {_display(cls, env, 's')}\n"
    exec(compile(source, f"<wire answer {_NAMES[cls]}>", "exec"), env)
    encode_answer: Encoder = env["encode_answer"]
    encode_answer.__doc__ = source
    return encode_answer
