"""What a scenario reads from files outside it, as one hash: part of every cache key.

A cached result is keyed by the resolved scenario and the request list
(:mod:`simulator.experiments.cache`); both name a GPU, a model and an engine profile only by
name or path. Their contents are read when the simulation is set up: the GPU profile (its spec,
its fitted efficiencies, its power model, its measured latency tables, and those of the profile
named by ``efficiency_tables_from``), the model (a catalog entry or a Hugging Face
``config.json``) and the engine profile. Editing any of them (a re-calibrated profile folder,
a spec whose bandwidth was corrected) must not return the results of the old contents:
:func:`inputs_fingerprint` hashes what was read, so the key changes with the contents and not
with the file's name or modification time.

File contents are hashed once per ``(path, modification time, size)`` in a process (a plan
asks for hundreds of keys over a handful of files).
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf.engine_profile import get_engine_profile
from simulator.perf.fitted import FITTED_FILE
from simulator.perf.power import POWER_FILE
from simulator.perf.tables.files import TABLES_DIR
from simulator.perf.tables.flat_profile import PROVENANCE_FILE, TABLE_FILES

__all__ = ["absolute_spec_path", "inputs_fingerprint"]

#: per file, by (path, st_mtime_ns, st_size): the hex SHA-256 of its bytes
_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}
#: files hashed at most before the memo is cleared (bounded memory in a long-lived process)
_MAX_MEMO = 4096


def _file_digest(p: Path) -> str:
    """Hex SHA-256 of the bytes of file ``p`` (memoised by path, mtime and size)."""
    st = p.stat()
    key = (str(p), st.st_mtime_ns, st.st_size)
    hit = _FILE_DIGESTS.get(key)
    if hit is None:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        hit = h.hexdigest()
        if len(_FILE_DIGESTS) >= _MAX_MEMO:
            _FILE_DIGESTS.clear()
        _FILE_DIGESTS[key] = hit
    return hit


def _profile_files(folder: Path) -> list[Path]:
    """The files of a GPU profile folder the set-up may read: the flat harness tables, the
    provenance, fitted and power files beside the spec, and everything under ``tables/``."""
    names = [*TABLE_FILES.values(), PROVENANCE_FILE, FITTED_FILE, POWER_FILE]
    files = [folder / n for n in names]
    tables = folder / TABLES_DIR
    if tables.is_dir():
        files += sorted(tables.rglob("*"))
    return [p for p in files if p.is_file()]


def _gpu_part(h: Any, name_or_path: str, seen: set[str]) -> None:
    """Add the GPU spec's values and its profile folder's files (then those of the profile
    named by ``efficiency_tables_from``) to hash ``h``."""
    gpu = get_gpu(name_or_path)
    if gpu.name in seen:
        return
    seen.add(gpu.name)
    h.update(repr([(f.name, getattr(gpu, f.name)) for f in dataclasses.fields(gpu)
                   if f.name != "profile_dir"]).encode())
    if gpu.profile_dir is not None:
        folder = Path(gpu.profile_dir)
        for p in _profile_files(folder):
            h.update(f"\x1f{p.relative_to(folder).as_posix()}\x1e{_file_digest(p)}".encode())
    if gpu.efficiency_tables_from:
        _gpu_part(h, gpu.efficiency_tables_from, seen)


def absolute_spec_path(value: Any, folders: Sequence[Path | None]) -> Any:
    """``value`` made absolute when it looks like a relative file path (a ``/`` or a
    ``.yaml`` / ``.yml`` / ``.json`` suffix) that exists under one of ``folders`` (the first
    that has it); anything else (a catalog name, an absolute path, a path found nowhere) as
    it is. The rule :func:`simulator.experiments.runner.absolute_spec_paths` applies to every
    point, and the set-up's lookup next to the scenario file."""
    if not isinstance(value, str) or Path(value).is_absolute():
        return value
    if "/" not in value and not value.endswith((".yaml", ".yml", ".json")):
        return value
    for d in folders:
        if d is not None and (Path(d) / value).exists():
            return str((Path(d) / value).resolve())
    return value


def inputs_fingerprint(scenario: Mapping[str, Any],
                       folders: Sequence[Path | None] = ()) -> str:
    """Hex SHA-256 of what the resolved ``scenario`` (a dict: ``Scenario.model_dump()``)
    reads from outside itself: the GPU profile's spec values and files, the model's (and a
    speculative draft model's) architecture and the engine profile (module docstring); with
    ``pools:``, those of every pool too (a pool's own ``model``, ``hardware`` and ``perf``
    sections, else the scenario's).

    ``folders``: where a relative path is looked up first (the scenario's folder), as the
    set-up looks it up. A name or path that does not resolve enters as its error text: the
    simulation then fails with that error itself, where it always did.
    """
    h = hashlib.sha256()
    _add_view(h, scenario, folders)
    for pool in scenario.get("pools") or ():
        h.update(b"\x1dpool\x1d")
        _add_view(h, {**scenario, **{k: v for k, v in pool.items()
                                     if k in ("model", "hardware", "perf") and v is not None}},
                  folders)
    return h.hexdigest()


def _add_view(h: Any, scenario: Mapping[str, Any], folders: Sequence[Path | None]) -> None:
    """Add the GPU, model, engine profile and draft model of one scenario (or pool) view
    (relative paths looked up under ``folders`` first)."""
    def at(v: Any) -> Any:
        return absolute_spec_path(v, folders)
    gpu = at((scenario.get("hardware") or {}).get("gpu"))
    model = at(scenario.get("model"))
    engine = at((scenario.get("perf") or {}).get("engine"))
    draft = at((scenario.get("speculative") or {}).get("draft_model"))
    # the engine profile's values (its file's location left out: where servesim is installed
    # is not an input)
    parts = [("gpu", lambda: _gpu_part(h, str(gpu), set())),
             ("model", lambda: h.update(repr(get_model(str(model))).encode())),
             ("engine", lambda: h.update(get_engine_profile(engine).model_dump_json(
                 exclude={"path"}).encode()))]
    if draft:
        parts.append(("draft_model", lambda: h.update(repr(get_model(str(draft))).encode())))
    for what, part in parts:
        h.update(f"\x1d{what}\x1d".encode())
        try:
            part()
        except (ValueError, OSError) as e:
            h.update(f"unresolved: {e}".encode())
