"""Reading a scenario-like YAML file: a mapping, duplicate keys refused, YAML 1.2 floats
(``1e9``), within the bounds of :mod:`simulator.base.input_limits`; every failure one line
naming the file (and its line where YAML gives one)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from simulator.base.input_limits import BoundedLoaderMixin, InputLimitError, load_yaml
from simulator.base.resources import find_yaml_file, not_a_file_reason, not_text_reason
from simulator.scenario.errors import ScenarioError


class _UniqueKeyLoader(BoundedLoaderMixin, yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate mapping keys (PyYAML keeps the last one),
    with the bounds of :mod:`simulator.base.input_limits` (alias expansion, nesting, digits)."""


def _construct_unique_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})",
                key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_unique_mapping)
# YAML 1.2 (core schema) reads ``1e9`` and ``2E-3`` as floats; PyYAML implements YAML 1.1,
# whose float pattern needs a dot (``1.0e9``) and would hand the scenario the *string*
# "1e9", which strict validation then rejects. Resolve the 1.2 spelling as a float.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def load_yaml_text(text: str):
    """Parse YAML like ``yaml.safe_load`` but reject duplicate keys.

    Raises
    ------
    InputLimitError
        Over a limit of :mod:`simulator.base.input_limits` (a :class:`yaml.YAMLError`).
    yaml.YAMLError
        Text that is not YAML, or a duplicate key.
    """
    return load_yaml(text, _UniqueKeyLoader)


def read_yaml_mapping(path: str | Path, what: str = "scenario",
                      error: type[Exception] | None = None) -> tuple[dict, Path]:
    """Read a YAML file holding a mapping (looked up as given, then under ``scenarios/``).

    Returns
    -------
    (dict, Path)
        The mapping (empty for an empty file) and the resolved file path.

    Raises
    ------
    ScenarioError (or ``error``)
        One line: file not found, not valid YAML (with its line), unreadable, or not a mapping.
    """
    err = error or ScenarioError
    p = Path(path)
    if not p.is_file():  # a name under scenarios/; a bare name never means a folder here
        try:
            p = find_yaml_file(path, "scenarios", what)
        except FileNotFoundError as e:
            raise err(str(e)) from None
    if not p.is_file():
        raise err(f"{p}: {not_a_file_reason(p, f'{what} file')}")
    try:
        raw = load_yaml_text(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise err(f"{p}: {not_text_reason(e)}; a {what} file is YAML text") from None
    except InputLimitError as e:  # valid YAML, but too large or too deep to read
        raise err(e.at(str(p))) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise err(f"{p}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except OSError as e:
        raise err(f"{p}: cannot read ({e.strerror})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise err(f"{p}: a {what} file must be a YAML mapping")
    return raw, p.resolve()


def read_scenario_yaml(path: str | Path) -> dict:
    """Read a scenario file into a dict (raises :class:`ScenarioError` on I/O or YAML errors)."""
    raw, p = read_yaml_mapping(path, "scenario")
    raw.setdefault("__file__", str(p))
    return raw
