"""The override engine: one canonical form per field type, and ``--set``'s parsing, for any dataclass tree.

It knows nothing of a training run: :mod:`fastcore_ops.training.config.schema` declares the sections,
:mod:`fastcore_ops.training.config.validation` judges the values. No library replaces it: OmegaConf parses
YAML values (no tuples) and names its own errors, jsonargparse and tyro build their own command
lines (``--section.field value``) rather than ``--set section.field=<Python literal>``, and none
of them turns an option group on with ``{}`` or says which field a value broke as these do.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Section:
    ...     rate: float = 0.1
    >>> assign(Section(), ["rate"], "1", "section"), assign_value(Section(), ["rate"], 2, "section")
    (Section(rate=1.0), Section(rate=2.0))
    >>> differences(Section(), Section(rate=2.0))
    [('rate', 0.1, 2.0)]
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import types
import typing

from fastcore_ops.cli import closest


# Said where a name in the methods section is unknown: it may be a method of the user's own.
_OWN_METHODS = ("; a method defined in your own package is registered by importing its module "
                "(python -m fastcore_ops.training.train --import MODULE)")


@functools.cache
def field_types(cls) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _optional_of(kind) -> object | None:
    """``X`` for a field typed ``X | None``, else None."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


def _is_section(kind) -> bool:
    """Whether a field of type ``kind`` is a section, which --set and JSON address field by field."""
    return dataclasses.is_dataclass(kind)


def _tuple_items(kind, length: int) -> tuple | None:
    """The item types of a ``tuple[...]`` type for ``length`` items, or None when it cannot have that many."""
    args = typing.get_args(kind)
    if len(args) == 2 and args[1] is Ellipsis:
        return (args[0],) * length
    return args if len(args) == length else None


def built(path: str, make, *args, **kwargs):
    """``make(*args, **kwargs)``, its TypeError or ValueError prefixed with the field ``path`` it builds."""
    try:
        return make(*args, **kwargs)
    except (TypeError, ValueError) as error:
        if not path:
            raise
        raise type(error)(f"{path}: {error}") from None


def from_fields(path: str, kind, values: dict):
    """The dataclass ``kind`` from a dict of its fields, unknown names refused."""
    fields = field_types(kind)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown configuration field {_join(path, unknown[0])!r}; fields of "
                         f"{path or 'a configuration'}: {', '.join(fields)}{_OWN_METHODS if path == 'methods' else ''}")
    converted = {name: canonical(_join(path, name), value, fields[name]) for name, value in values.items()}
    return built(path, kind, **converted)


def canonical(path: str, value, kind):
    """``value`` in the one form a field ``path`` of type ``kind`` holds.

    A whole number in a float field becomes a float, a list in a tuple field a tuple, a dict in
    a dataclass field that dataclass; a dataclass is rebuilt from its fields, each canonical, and
    lists and dicts are copied, so a config never shares them with another. So a config built in
    Python, loaded from JSON or changed by --set compares and hashes alike. Values of another
    type are left for :func:`validate` to name, except where a dataclass goes.
    """
    optional = _optional_of(kind)
    if value is None and optional is not None:
        return None
    kind = optional or kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # a whole number no float holds (a file's 400 digits): not a value any field takes
            raise ValueError(f"{path} must be a number a float holds, got a whole number of {len(str(value))} "
                             f"digits") from None
    if typing.get_origin(kind) is tuple and isinstance(value, (list, tuple)):
        items = _tuple_items(kind, len(value))
        if items is None:
            return tuple(value)
        return tuple(canonical(f"{path}[{index}]", item, item_kind)
                     for index, (item, item_kind) in enumerate(zip(value, items)))
    if typing.get_origin(kind) in (list, dict) and isinstance(value, (list, dict)):
        return copy.deepcopy(value)
    if dataclasses.is_dataclass(kind):
        if isinstance(value, kind):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(kind)}
        if not isinstance(value, dict):
            off = "None (off), " if optional else ""
            raise TypeError(f"{path} must be {off}a {kind.__name__} or a dict of its fields "
                            f"({', '.join(field_types(kind))}), got {type(value).__name__} {value!r}")
        return from_fields(path, kind, value)
    return value


def _is_instance(value, kind) -> bool:
    optional = _optional_of(kind)
    if optional is not None:
        return value is None or _is_instance(value, optional)
    origin = typing.get_origin(kind)
    if origin is tuple:
        items = _tuple_items(kind, len(value)) if isinstance(value, tuple) else None
        return items is not None and all(map(_is_instance, value, items))
    if origin is not None:  # list[...], dict[...]: their items are validate()'s to judge
        return isinstance(value, origin)
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, kind) and not isinstance(value, bool)


def _type_name(kind) -> str:
    optional = _optional_of(kind)
    if optional is not None and dataclasses.is_dataclass(optional):
        return (f"None (off) or a dict of {optional.__name__}'s fields ({', '.join(field_types(optional))}; "
                f"{{}} for its defaults)")
    return kind.__name__ if typing.get_origin(kind) is None and hasattr(kind, "__name__") else str(kind)


def _parse(path: str, text: str, kind):
    """``text`` as a value of the field ``path``'s type ``kind``: the text itself for a str, else a Python literal."""
    if kind is str:
        return text
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"not a Python literal; expected {_type_name(kind)}") from None
    return _checked(path, value, kind)


def _checked(path: str, value, kind):
    """``value`` in the canonical form of the field ``path``'s type ``kind``; ValueError when it is of another type."""
    value = canonical(path, value, kind)
    if not _is_instance(value, kind):
        raise ValueError(f"expected {_type_name(kind)}, got {type(value).__name__}")
    return value


def _sections(kind) -> list[str]:
    return [name for name, field_kind in field_types(kind).items()
            if dataclasses.is_dataclass(_optional_of(field_kind) or field_kind)]


def assign(target, names: list[str], text: str, path: str):
    """A copy of the dataclass ``target`` (at ``path``) with its field at dotted ``names`` set from ``text``."""
    return _assign(target, names, path, lambda here, kind: _parse(here, text, kind))


def assign_value(target, names: list[str], value, path: str):
    """A copy of ``target`` with its field at dotted ``names`` set to the Python ``value`` (a recipe's change),
    in its canonical form and checked against the field's type as :func:`assign` checks text (see above)."""
    return _assign(target, names, path, lambda here, kind: _checked(here, value, kind))


def _assign(target, names: list[str], path: str, leaf):
    """A copy of ``target`` (at ``path``) with its field at dotted ``names`` set to ``leaf(field path, field type)``."""
    name, rest = names[0], names[1:]
    here = _join(path, name)
    kinds = field_types(type(target))
    if name not in kinds and rest:
        listing = f"sections{' of ' + path if path else ''}"
        raise ValueError(f"no section {here!r}; {closest(name, _sections(type(target)), listing)}")
    if name not in kinds:
        settable = [field_name for field_name, kind in kinds.items() if not _is_section(kind)]
        raise ValueError(f"unknown field {name!r}; {closest(name, settable, 'fields here')}"
                         f"{_OWN_METHODS if path == 'methods' else ''}")
    kind, current = kinds[name], getattr(target, name)
    if rest:
        group = _optional_of(kind)
        if current is None and dataclasses.is_dataclass(group):
            raise ValueError(f"{here} is off (None); turn it on first: --set {here}={{}} for its defaults, or a "
                             f"dict of its fields ({', '.join(field_types(group))})")
        if not dataclasses.is_dataclass(current):
            raise ValueError(f"{here} is a field, not a section; write --set {here}=value")
        value = _assign(current, rest, here, leaf)
    elif _is_section(kind):
        raise ValueError(f"{here} is a section; set its fields one by one: {here}.{next(iter(field_types(kind)))}"
                         f"=..., ...")
    else:
        value = leaf(here, kind)
    return built(path, dataclasses.replace, target, **{name: value})


def differences(old, new, path: str = "") -> list[tuple[str, object, object]]:
    """Each field that differs between two dataclass trees of one type, by the dotted name --set gives it, with
    its old and new value; a section or option group present in both is compared field by field."""
    rows = []
    for field in dataclasses.fields(new):
        here, before, after = _join(path, field.name), getattr(old, field.name), getattr(new, field.name)
        if dataclasses.is_dataclass(before) and type(before) is type(after):
            rows += differences(before, after, here)
        elif before != after:
            rows.append((here, before, after))
    return rows
