"""Input checks shared by every adapter, so bad input fails the same way everywhere.

Every public write or read goes through these before touching a backend; a
failure raises :class:`~memkit.InvalidInputError` and nothing is written.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._filters import Condition, parse_filters

__all__ = ["DEFAULT_LIMITS", "Limits", "check_forwarded", "checked", "checked_as", "checked_methods"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INT64 = 2**63


@dataclass(frozen=True)
class Limits:
    """Bounds on what one call may carry; pass your own to an adapter to change them.

    Parameters
    ----------
    max_content_chars
        Longest ``content`` accepted by ``add``.
    max_id_chars
        Longest ``user_id``, ``agent_id``, ``workflow_id`` or memory id.
    max_metadata_bytes
        Largest metadata, measured as compact UTF-8 JSON.
    max_metadata_depth
        Deepest nesting of dicts and lists inside metadata (and trace data), at most 200:
        stores, views and exports walk nested values recursively.
    max_limit
        Largest ``limit`` for ``search`` and ``get_all``.
    max_query_chars
        Longest search query.
    """

    max_content_chars: int = 100_000
    max_id_chars: int = 256
    max_metadata_bytes: int = 256_000
    max_metadata_depth: int = 10
    max_limit: int = 10_000
    max_query_chars: int = 10_000

    def __post_init__(self) -> None:
        depth = self.max_metadata_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH_LIMIT:
            raise ConfigError(f"Limits.max_metadata_depth must be an int from 1 to {MAX_DEPTH_LIMIT}, got {depth!r}")


# Python walks nested values recursively (json, pydantic, the redactor, the views), about a
# thousand frames deep at most; a bound well under that keeps every walk after the check safe.
MAX_DEPTH_LIMIT = 200

DEFAULT_LIMITS = Limits()


def check_depth(value: object, limit: int, name: str) -> None:
    """Refuse ``value`` if dicts and lists nest in it deeper than ``limit`` levels.

    A loop, not recursion: it runs before anything else walks the value (a redactor, the JSON
    checks), so data nested thousands of levels deep is an :class:`InvalidInputError`, never a
    ``RecursionError``. The top level counts as level 1, as in the metadata checks.
    """
    stack: list[tuple[object, int, str]] = [(value, 1, name)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            raise InvalidInputError(
                f"{name} is nested deeper than {limit} levels (at {shorten_path(where)});"
                " flatten it or raise Limits.max_metadata_depth"
            )
        for key, child in children:
            if isinstance(child, (Mapping, list, tuple)):
                stack.append((child, depth + 1, f"{where}.{key}" if isinstance(item, Mapping) else f"{where}[{key}]"))


def shorten_path(where: str, keep: int = 120) -> str:
    """A path into nested data, its middle left out when long (a path 600 levels deep is not read)."""
    return where if len(where) <= keep else f"{where[: keep // 2]}…{where[-keep // 2 :]}"


def check_text(value: str, name: str) -> str:
    """``value`` unchanged if it is valid Unicode: a lone surrogate (``"\\ud800"``) can be
    neither stored as UTF-8 nor sent to a server, so it is refused before any write."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"{name} holds {value[exc.start:exc.end]!r} at position {exc.start}, a lone surrogate,"
                " which is not text (decode bytes with errors='replace' first)"
            ) from None
    return value


def check_id(value: object, name: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """A user, agent, workflow or memory id: a non-blank string without control characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    check_text(value, name)
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    if len(value) > limits.max_id_chars:
        raise InvalidInputError(f"{name} is {len(value)} characters; the limit is {limits.max_id_chars}")
    if _CONTROL.search(value):
        raise InvalidInputError(f"{name} must not contain control characters")
    return value


def check_namespace(user_id: object, agent_id: object, limits: Limits = DEFAULT_LIMITS) -> tuple[str, str]:
    return check_id(user_id, "user_id", limits), check_id(agent_id, "agent_id", limits)


# An id that starts with this names its namespace (see bound_id): no other namespace may hold it.
_BOUND = "@"


def bound_id(user_id: str, agent_id: str, local: str) -> str:
    """An id only the namespace ``user_id``/``agent_id`` can hold: a digest of the namespace, then ``local``.

    For ids a caller can compute (a LangGraph item's): any namespace could store a memory under
    another's future id and make its write fail, so the write paths (:func:`check_bound`) refuse an
    id bound to a namespace other than the memory's own.
    """
    return f"{_bound_prefix(user_id, agent_id)}{local}"


@functools.lru_cache(maxsize=64)  # a write checks every id against its namespace's: one digest a batch
def _bound_prefix(user_id: str, agent_id: str) -> str:
    digest = hashlib.sha256(json.dumps([user_id, agent_id]).encode()).hexdigest()[:32]
    return f"{_BOUND}{digest}/"


def check_bound(memory_id: str, user_id: str, agent_id: str, name: str = "id") -> str:
    """``memory_id``, refused when it is bound (:func:`bound_id`) to another namespace than ``user_id``/``agent_id``."""
    if memory_id.startswith(_BOUND) and not memory_id.startswith(bound_id(user_id, agent_id, "")):
        raise InvalidInputError(
            f"{name} {memory_id!r} starts with {_BOUND!r}: such ids are bound to the namespace they were made"
            " for (memkit's own keyed ids), and this is not it"
        )
    return memory_id


def check_scope(
    memory_id: object, user_id: object, agent_id: object, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, str | None, str | None]:
    """A scoped delete's arguments: the memory id, and the namespace parts given (``None`` = any)."""
    return (
        check_id(memory_id, "memory_id", limits),
        None if user_id is None else check_id(user_id, "user_id", limits),
        None if agent_id is None else check_id(agent_id, "agent_id", limits),
    )


def check_content(content: object, limits: Limits = DEFAULT_LIMITS) -> str:
    if not isinstance(content, str):
        raise InvalidInputError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError("content must not be empty")
    if len(content) > limits.max_content_chars:
        raise InvalidInputError(
            f"content is {len(content)} characters; the limit is {limits.max_content_chars}"
            " (raise Limits.max_content_chars to allow more)"
        )
    if "\x00" in content:
        raise InvalidInputError("content must not contain NUL characters")
    return check_text(content, "content")


def _json_copy(value: Any, depth: int, limits: Limits, where: str) -> Any:
    """``value`` checked as metadata and copied as JSON reads it back: dicts, lists and plain str, int
    and float (tuples, other mappings and subclasses made so), in one walk."""
    if depth > limits.max_metadata_depth:
        raise InvalidInputError(f"metadata is nested deeper than {limits.max_metadata_depth} levels at {where}")
    kind = type(value)
    if kind is str:
        return value if value.isascii() else check_text(value, f"metadata value at {where}")
    if value is None or kind is bool:
        return value
    if kind is dict or isinstance(value, Mapping):
        copy: dict[str, Any] = {}
        leaves = depth < limits.max_metadata_depth  # a scalar below may be taken as it is
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    raise InvalidInputError(f"metadata keys must be strings; {key!r} at {where} is not")
                key = str.__str__(key)
            if not key.isascii():
                check_text(key, f"metadata key at {where}")
            sort = type(item)
            if leaves and (item is None or sort is bool or (sort is str and item.isascii())
                           or (sort is int and -_INT64 <= item < _INT64)):
                copy[key] = item
            else:
                copy[key] = _json_copy(item, depth + 1, limits, f"{where}.{key}")
        return copy
    if kind is list or isinstance(value, (list, tuple)):
        return [_json_copy(item, depth + 1, limits, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, str):
        return check_text(str.__str__(value), f"metadata value at {where}")
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise InvalidInputError(f"metadata integer at {where} does not fit in 64 bits")
        return int.__int__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"metadata value at {where} is {value}, which JSON cannot hold")
        return float.__float__(value)
    raise InvalidInputError(
        f"metadata value at {where} is a {type(value).__name__}, which is not JSON-serialisable"
        " (use str, int, float, bool, None, list or dict)"
    )


def _flat_scalars(metadata: Mapping[Any, Any]) -> bool:
    """True for the common case (string keys, scalar values) that needs no deep walk or copy."""
    for key, value in metadata.items():
        kind = type(value)
        if type(key) is not str or not key.isascii():
            return False
        if kind is int:
            if not -_INT64 <= value < _INT64:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif kind is str:
            if not value.isascii():
                return False  # the deep walk checks it is valid text
        elif kind is not bool and value is not None:
            return False
    return True


def encode_metadata(metadata: object, limits: Limits = DEFAULT_LIMITS) -> tuple[dict[str, Any], str]:
    """Validate metadata; return a private JSON-normalised copy and its compact JSON text."""
    if metadata is None:
        return {}, "{}"
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a dict, got {type(metadata).__name__}")
    # The common case (string keys, scalar values) needs no deep walk, only a shallow copy; anything
    # else is checked and copied in one walk (stops at the depth limit: it never recurses far).
    # Either copy is private: scalars are immutable, and nothing else holds the walk's dicts and lists.
    flat = _flat_scalars(metadata)
    result: dict[str, Any] = dict(metadata) if flat else _json_copy(metadata, 1, limits, "metadata")
    encoded = json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise InvalidInputError(f"metadata is {size} bytes as JSON; the limit is {limits.max_metadata_bytes}")
    return result, encoded


def check_metadata(metadata: object, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Return a private JSON-normalised copy (tuples become lists) of valid metadata."""
    return encode_metadata(metadata, limits)[0]


def check_limit(limit: object, limits: Limits = DEFAULT_LIMITS, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInputError(f"{name} must be an integer, got {type(limit).__name__}")
    if not 1 <= limit <= limits.max_limit:
        raise InvalidInputError(f"{name} must be between 1 and {limits.max_limit}, got {limit}")
    return limit


def check_offset(offset: object) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidInputError(f"offset must be an integer, got {type(offset).__name__}")
    if offset < 0:
        raise InvalidInputError(f"offset must not be negative, got {offset}")
    # Every store counts rows in 64 bits (SQLite and Neo4j raise OverflowError past that).
    if offset >= _INT64:
        raise InvalidInputError(f"offset must be below 2**63, got {offset}")
    return offset


def check_query(query: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """``None`` and blank queries become ``""``, which lists the namespace newest first."""
    if query is None:
        return ""
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string or None, got {type(query).__name__}")
    if len(query) > limits.max_query_chars:
        raise InvalidInputError(f"query is {len(query)} characters; the limit is {limits.max_query_chars}")
    return check_text(query, "query").strip()


def check_trace_data(trace_data: object, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """A trace's data as a dict, refused before anything walks it (the redactor runs next) if it
    nests deeper than the metadata it becomes may."""
    if not isinstance(trace_data, Mapping):
        raise InvalidInputError(f"trace_data must be a dict, got {type(trace_data).__name__}")
    check_depth(trace_data, limits.max_metadata_depth, "trace_data")
    return dict(trace_data)


class Read(NamedTuple):
    """A validated read of one namespace: what every adapter's ``get_page`` starts from."""

    user: str
    agent: str
    limit: int
    offset: int
    conditions: tuple[Condition, ...]


def check_read(
    user_id: object, agent_id: object, limit: object, filters: object, limits: Limits = DEFAULT_LIMITS,
    offset: object = 0,
) -> Read:
    """Validate a namespace read in one place, so every adapter rejects the same things."""
    checked_limit = check_limit(limit, limits)
    checked_offset = check_offset(offset)
    user, agent = check_namespace(user_id, agent_id, limits)
    return Read(user, agent, checked_limit, checked_offset, parse_filters(filters))


# -- public calls: arguments bound to the signature and checked against its annotations ------

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_WHY_NOT_TEXT = (str, bytes, Mapping)


def _describe(hint: Any) -> tuple[Callable[[object], bool], str] | None:
    """A predicate for values matching ``hint`` and how to name them, or ``None`` to accept anything.

    Only the outer kind is checked (a dict, a list, a string): what is inside is the adapters'
    to check, with their own messages and limits."""
    if hint is Any or hint is object or isinstance(hint, TypeVar):
        return None
    if hint is None or hint is type(None):
        return (lambda v: v is None), "None"
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        parts = [_describe(arg) for arg in get_args(hint)]
        if any(p is None for p in parts):
            return None
        checks = [p for p in parts if p is not None]
        return (lambda v: any(check(v) for check, _ in checks)), " or ".join(name for _, name in checks)
    if origin is Literal:
        allowed = get_args(hint)
        return (lambda v: v in allowed), "one of " + ", ".join(repr(a) for a in allowed)
    kind = origin if origin is not None else hint
    if kind is str:
        return (lambda v: isinstance(v, str)), "a string"
    if kind is bool:
        return (lambda v: isinstance(v, bool)), "True or False"
    if kind is int:
        return (lambda v: isinstance(v, int) and not isinstance(v, bool)), "an integer"
    if kind is float:
        return (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)), "a number"
    if kind in (dict, Mapping, MutableMapping):
        return (lambda v: isinstance(v, Mapping)), "a dict"
    if kind in (list, tuple, Sequence):
        return (lambda v: isinstance(v, (list, tuple))), "a list"
    if kind in (Iterable, Iterator):
        # A lone dict or string is iterable, but passing one where many are wanted is a mistake.
        return (lambda v: isinstance(v, Iterable) and not isinstance(v, _WHY_NOT_TEXT)), "a list (or other iterable)"
    if kind is Callable:
        return callable, "a callable"
    if isinstance(kind, type):
        def is_instance(v: object) -> bool:
            try:
                return isinstance(v, kind)
            except TypeError:  # a protocol that cannot be checked at run time
                return True

        return is_instance, f"a {kind.__name__}"
    return None


class _Checker:
    """Binds one callable's arguments to its signature and checks their outer types, once resolved."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn = fn
        self.name = name
        self.signature = inspect.signature(fn)
        self._checks: dict[str, tuple[Callable[[object], bool], str]] | None = None

    def shown(self) -> str:
        params = [p for p in self.signature.parameters.values() if p.name != "self"]
        return f"{self.name}({', '.join(str(p.replace(annotation=inspect.Parameter.empty)) for p in params)})"

    def checks(self) -> dict[str, tuple[Callable[[object], bool], str]]:
        if self._checks is None:
            try:
                hints = get_type_hints(self.fn)
            except Exception:  # names an annotation cannot reach: check the binding only
                hints = {}
            found = {}
            for name, param in self.signature.parameters.items():
                if name in hints and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                    check = _describe(hints[name])
                    if check is not None:
                        found[name] = check
            self._checks = found
        return self._checks

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        params = self.signature.parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            # An unknown name is the likelier mistake than the arguments it left out: say it first.
            for name in kwargs:
                param = params.get(name)
                if param is None or param.kind is param.POSITIONAL_ONLY:
                    raise InvalidInputError(
                        f"{self.name}() got an unexpected argument {name!r}; it takes {self.shown()}"
                    )
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            # Keywords it only passes on may be the real mistake (search(bogus=1)): name them too.
            extra = [name for name in kwargs if name not in params]
            also = f" (and got {', '.join(repr(n) for n in extra)}, none of its own arguments)" if extra else ""
            raise InvalidInputError(f"{self.name}() {_reason(exc)}{also}; it takes {self.shown()}") from None
        checks = self.checks()
        for name, value in bound.arguments.items():
            check = checks.get(name)
            if check is not None and not check[0](value):
                raise InvalidInputError(
                    f"{self.name}(): {name} must be {check[1]}, got {_kind(value)}"
                )
        return bound

    def bind_extra(self, options: Mapping[str, Any], taken: Sequence[str], caller: str) -> None:
        """Check keyword ``options`` that ``caller`` forwards to this callable (whose ``taken`` it fills)."""
        params = self.signature.parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        accepted = [n for n, p in params.items() if n not in taken and n != "self" and p.kind is not p.VAR_POSITIONAL]
        checks = self.checks()
        for name, value in options.items():
            if name not in accepted:
                raise InvalidInputError(
                    f"{caller}() got an unexpected argument {name!r}; besides its own arguments it passes on"
                    f" only those {self.name}() takes: {', '.join(accepted) if accepted else 'none'}"
                )
            check = checks.get(name)
            if check is not None and not check[0](value):
                raise InvalidInputError(f"{caller}(): {name} must be {check[1]}, got {_kind(value)}")


def _reason(exc: TypeError) -> str:
    """``inspect``'s binding error in the words of a call (``missing a required argument: 'x'``)."""
    text = str(exc)
    return text if text.startswith(("got ", "missing ", "too many ")) else f"was called wrongly: {text}"


def _kind(value: object) -> str:
    name = type(value).__name__
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        shown = repr(value)
        return f"{name} {shown[:40] + '...' if len(shown) > 40 else shown}"
    return name


def checked(fn: F, name: str | None = None) -> F:
    """``fn`` with its arguments bound and their kinds checked first: a wrong call raises
    :class:`~memkit.InvalidInputError` naming the argument and what was expected, never a
    raw ``TypeError`` from deep inside. A generator function checks at the call, before its first
    item; a coroutine function when awaited (it stays a coroutine function)."""
    checker = _Checker(fn, name or fn.__qualname__)
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):
        # Still a coroutine function to whoever asks (agent frameworks do), checked when awaited.
        @functools.wraps(fn)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            checker.bind(args, kwargs)
            return await fn(*args, **kwargs)

        wrapper = awaited
    else:
        @functools.wraps(fn)
        def called(*args: Any, **kwargs: Any) -> Any:
            checker.bind(args, kwargs)
            return fn(*args, **kwargs)

        wrapper = called
    setattr(wrapper, "__memkit_checker__", checker)  # noqa: B010 - read back by check_forwarded
    return cast(F, wrapper)


def checked_as(name: str) -> Callable[[F], F]:
    """:func:`checked` as a decorator that names the callable as users call it (``memkit.open``)."""
    return lambda fn: checked(fn, name)


def check_forwarded(
    caller: str, target: Callable[..., Any], options: Mapping[str, Any], taken: Sequence[str]
) -> None:
    """Check keyword ``options`` that ``caller`` passes on to ``target`` (a provider's method, say),
    whose parameters ``taken`` the caller fills itself: an unknown one or the wrong kind is refused."""
    if not options:
        return
    if isinstance(target, types.MethodType):  # named by the object's class: the adapter, not the base it inherits from
        fn, name = target.__func__, f"{type(target.__self__).__name__}.{target.__func__.__name__}"
    else:
        fn, name = target, getattr(target, "__qualname__", repr(target))
    _forward_checker(fn, name).bind_extra(options, taken, caller)


@functools.lru_cache(maxsize=256)
def _forward_checker(fn: Callable[..., Any], name: str) -> _Checker:
    found = getattr(fn, "__memkit_checker__", None)
    return found if isinstance(found, _Checker) else _Checker(fn, name)


def checked_methods(cls: C) -> C:
    """Apply :func:`checked` to every public method of ``cls`` (``__init__`` included), once."""
    for attr, value in list(vars(cls).items()):
        if (attr.startswith("_") and attr != "__init__") or not inspect.isfunction(value):
            continue
        shown = cls.__name__ if attr == "__init__" else f"{cls.__name__}.{attr}"
        setattr(cls, attr, checked(value, shown))
    return cls
