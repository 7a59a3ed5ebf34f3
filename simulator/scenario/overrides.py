"""Command-line overrides of a scenario (``--set a.b.c=value``, and the keys ``--trace`` and
``--seed`` imply): parsing, applying them to the raw mapping, and naming the flag an error
comes from."""
from __future__ import annotations

import copy
import re
import typing
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from simulator.base.input_limits import InputLimitError, clip_text, short_repr
from simulator.scenario.errors import ScenarioError
from simulator.scenario.yaml_files import load_yaml_text


def first_model(ann: Any) -> type[BaseModel] | None:
    """The first pydantic model class in a field annotation (``X``, ``X | None``,
    ``list[X]``), or None."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for a in typing.get_args(ann):
        m = first_model(a)
        if m is not None:
            return m
    return None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Parse ``a.b.c=value`` (value parsed as YAML: numbers, booleans, lists, null).

    Raises
    ------
    ScenarioError
        If there is no ``=`` or the key is empty.
    """
    origin = getattr(item, "origin", None)  # an Override names its flag (--plan-set, ...)
    flag = origin.split(" ", 1)[0] if origin and origin.startswith("--") else "--set"
    key, raw = split_assignment(item, flag, "key.path=value")
    try:
        return key.split("."), parse_yaml_value(raw) if raw.strip() != "" else ""
    except InputLimitError as e:
        raise ScenarioError(f"{flag} {clip_text(f'{key}={raw}')}: "
                            f"{_value_problem(e)}") from None


def _value_problem(e: InputLimitError) -> str:
    """An :class:`InputLimitError` of a value typed on the command line, without the line
    number of its one-line text."""
    return f"{e.key}: {e.problem}" if e.key else e.problem


def split_assignment(item: str, flag: str, form: str) -> tuple[str, str]:
    """Split a CLI ``key.path=...`` argument into its key and its raw right-hand side.

    Raises
    ------
    ScenarioError
        Without ``=`` (the message shows ``form``) or with an empty key or key part.
    """
    if "=" not in item:
        raise ScenarioError(f"{flag} {short_repr(str(item))}: expected {form}")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ScenarioError(f"{flag} {short_repr(str(item))}: empty key")
    return key, raw


def parse_yaml_value(text: str) -> Any:
    """``text`` parsed as YAML (numbers, booleans, lists, null; ``1e9`` is a float as in YAML
    1.2), or as-is when not YAML.

    Raises
    ------
    InputLimitError
        A value over a limit of :mod:`simulator.base.input_limits` (an alias bomb, nesting, an
        integer of too many digits): refused, not passed on as text.
    """
    try:
        return load_yaml_text(text)
    except InputLimitError:
        raise
    except yaml.YAMLError:
        return text


class Override(str):
    """A ``key.path=value`` override that remembers how the user spelled it (``origin``:
    ``--set a.b=1``, ``--trace F``, ``--vary a.b=1,2``), so that a validation error it causes
    names the flag and the key path the user wrote."""

    origin: str

    def __new__(cls, item: str, origin: str | None = None):
        obj = super().__new__(cls, item)
        obj.origin = origin or getattr(item, "origin", None) or f"--set {clip_text(item)}"
        return obj


def cli_overrides(sets: list[str] | None = None, trace: str | None = None,
                  seed: int | None = None) -> list[str]:
    """The ``--set`` overrides of a CLI call plus those implied by ``--trace`` (replace the
    scenario's workload source by that trace file, format auto-detected unless a ``--set``
    states ``workload.format``, no column map unless one states ``workload.columns``) and
    ``--seed``.

    Returns
    -------
    list of Override
        ``key.path=value`` strings, each knowing the flag it came from.
    """
    out = [Override(s) for s in (sets or [])]
    if trace:
        implied = [f"workload.trace={trace}", "workload.synthetic=null",
                   "workload.synthetic_sessions=null"]
        # a format or column map the user states with --set (or a key under it) is kept:
        # --trace's defaults (detect the format, no column map) would replace it silently
        stated = {str(s).partition("=")[0].strip() for s in out}
        for key, default in (("workload.format", "auto"), ("workload.columns", "null")):
            if not any(k == key or k.startswith(key + ".") for k in stated):
                implied.append(f"{key}={default}")
        out += [Override(x, f"--trace {trace}") for x in implied]
    if seed is not None:
        out.append(Override(f"seed={seed}", f"--seed {seed}"))
    return out


def blame_override(e: ValidationError, overrides) -> str | None:
    """The flag (``Override.origin``) of the last override whose key path is on the path of
    ``e``'s first error (above or below it), or None."""
    loc = [str(p) for p in e.errors()[0]["loc"]
           if not (isinstance(p, str) and (p.startswith("function-") or p in ("str", "dict")))]
    found = None
    where = ".".join(loc)
    for item in overrides or []:
        key = str(item).partition("=")[0].strip()
        path = key.split(".")
        n = min(len(path), len(loc))
        # also a dotted key inside a mapping field (search_space.hardware.gpu: loc
        # ("search_space", "hardware.gpu"))
        nested = bool(loc) and (f"{where}.".startswith(f"{key}.")
                                or f"{key}.".startswith(f"{where}."))
        if (n and path[:n] == loc[:n]) or nested:
            found = getattr(item, "origin", None) or f"--set {clip_text(str(item))}"
    return found


#: a message that starts with the scenario key it is about (``model: ...``,
#: ``cluster.tensor_parallel_size=3 cannot shard ...``)
_LEADING_KEY = re.compile(r"([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?::|=)")


def message_key(message: str) -> str | None:
    """The scenario key path a check's message starts with (``hardware.gpu`` of
    ``hardware.gpu: unknown GPU 'x'``, ``cluster.tensor_parallel_size`` of
    ``cluster.tensor_parallel_size=3 cannot shard ...``), or None."""
    m = _LEADING_KEY.match(message)
    return m.group(1) if m is not None else None


def blame_message(message: str, overrides) -> str | None:
    """The flag (``Override.origin``) of the last override on the key path a check's message
    starts with (``hardware.gpu: unknown GPU 'x'`` after ``--set hardware.gpu=x``), or None
    (no such override, or a message that names no key first)."""
    key = message_key(message)
    if key is None:
        return None
    loc = key.split(".")
    found = None
    for item in overrides or []:
        path = str(item).partition("=")[0].strip().split(".")
        n = min(len(path), len(loc))
        if n and path[:n] == loc[:n]:
            found = getattr(item, "origin", None) or f"--set {clip_text(str(item))}"
    return found


def list_index(seq: list, part: str) -> int | None:
    """``part`` (a dotted path's component) as an index into the list section ``seq``
    (``pools.1``, ``kv_cache.offload.tiers.0``), or None when it is not one of its indices."""
    if part.isdigit() and len(part) <= 18 and int(part) < len(seq):
        return int(part)
    return None


def _list_index(seq: list, part: str, item: str) -> int:
    """``part`` as an index into ``seq`` (a list section such as ``pools``)."""
    i = list_index(seq, part)
    if i is None:
        raise ScenarioError(f"--set {clip_text(str(item))}: '{clip_text(part, 20)}' is not an "
                            f"index of a list of {len(seq)} (valid: 0..{len(seq) - 1})")
    return i


#: the spellings of a boolean pydantic's lax mode accepts (compared lower-cased); YAML files
#: stay strict, but a boolean typed on the command line may use any of them
_BOOL_SPELLINGS = {"true": True, "false": False, "1": True, "0": False, "yes": True,
                   "no": False, "on": True, "off": False, "t": True, "f": False, "y": True,
                   "n": False}


def override_annotation(model_cls: type[BaseModel], path: list[str]) -> Any:
    """The type annotation of the field ``path`` addresses in ``model_cls`` (list indices
    skipped), or None when the path leaves the model tree."""
    ann: Any = model_cls
    for part in path:
        if part.isdigit():
            continue
        m = first_model(ann)
        f = getattr(m, "model_fields", {}).get(part) if m is not None else None
        if f is None:
            return None
        ann = f.annotation
    return ann


def is_bool_field(ann: Any) -> bool:
    """Whether a field annotation is ``bool`` or ``bool | None``."""
    args = typing.get_args(ann)
    return ann is bool or (bool in args and all(a in (bool, type(None)) for a in args))


def cli_bool(value: Any, path: list[str], origin: str, nullable: bool = False) -> Any:
    """A command-line value for a boolean field as a bool: ``true/false``, ``1/0``,
    ``yes/no``, ``on/off`` (and ``t/f``, ``y/n``), any case, as pydantic's lax mode reads them.

    Raises
    ------
    ScenarioError
        One line naming the flag, the key path and the valid spellings.
    """
    if isinstance(value, bool) or (value is None and nullable):
        return value
    word = str(value).strip().lower()
    if isinstance(value, float) and value in (0.0, 1.0):
        word = str(int(value))
    if word in _BOOL_SPELLINGS:
        return _BOOL_SPELLINGS[word]
    raise ScenarioError(f"{origin}: {'.'.join(path)}: value {short_repr(value)} is not a "
                        "boolean; use true/false, 1/0, yes/no or on/off (any case)"
                        + (", or null" if nullable else ""))


def apply_overrides(raw: dict, overrides: list[str] | None,
                    schema: type[BaseModel] | None = None) -> dict:
    """Return a copy of ``raw`` with each ``a.b=v`` override applied (an integer part
    indexes a list: ``pools.1.cluster.num_replicas=2``).

    With ``schema`` (the model ``raw`` is validated against), a value for a boolean field is
    read with :func:`cli_bool` (``--plan-set search.early_stop=1`` works; a bad spelling raises
    :class:`ScenarioError` naming the flag). Scenario ``--set`` overrides pass no schema: their
    values are not coerced (docs/reference/scenario.md; pinned by the hostile corpus).
    """
    out = copy.deepcopy(raw)
    for item in overrides or []:
        path, value = parse_override(item)
        ann = override_annotation(schema, path) if schema is not None else None
        if ann is not None and is_bool_field(ann):
            origin = getattr(item, "origin", None) or f"--set {clip_text(item)}"
            value = cli_bool(value, path, origin, nullable=ann is not bool)
        d = out
        for p in path[:-1]:
            nxt = d[_list_index(d, p, item)] if isinstance(d, list) else d.get(p)
            if nxt is None:
                nxt = {}
                d[p] = nxt
            elif not isinstance(nxt, dict | list):
                raise ScenarioError(f"--set {clip_text(str(item))}: '{p}' is not a section")
            d = nxt
        if isinstance(d, list):
            d[_list_index(d, path[-1], item)] = value
        else:
            d[path[-1]] = value
    return out

