"""Result cache of experiments (sweeps, plans): one JSON file per simulation, keyed by content hash.

The key of a simulation is the SHA-256 of (what it is, the resolved scenario without its
``name``/``output_dir``/``workload`` sections, a fingerprint of the exact request list it
replays, a fingerprint of the files the scenario names (its GPU profile, model and engine
profile: :func:`simulator.experiments.input_files.inputs_fingerprint`), and the servesim
version). The workload enters through the fingerprint of the
requests themselves (arrival times, lengths, labels, patience, prefixes), which is stronger
than a trace file's size and modification time: editing the trace, its window, its rate
scale or its share tables changes the key; renaming the file does not.

Only the driver process writes; workers read. Writes are atomic (temporary file + rename),
so an interrupted sweep leaves no half-written entry and a re-run resumes where it stopped.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator import __version__

__all__ = ["CACHE_FORMAT", "ResultCache", "cache_key", "scenario_identity", "specs_fingerprint"]

#: Bumped when the layout of cached entries changes (old entries then miss).
CACHE_FORMAT = 3  # 2: per-step bottleneck shares in run extras; 3: the run verdict (bounds)

#: Scenario keys that do not change a simulation's result.
_NON_RESULT_KEYS = ("name", "output_dir", "__file__")


def scenario_identity(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved scenario minus the keys that do not affect results and the workload
    section (the workload is identified by :func:`specs_fingerprint` instead)."""
    return {k: v for k, v in scenario.items() if k not in _NON_RESULT_KEYS and k != "workload"}


def specs_fingerprint(specs: Sequence) -> str:
    """Content hash (hex SHA-256) of a request list.

    Hashes every field of every :class:`~simulator.base.request.RequestSpec` in order: arrival
    time, prompt and output lengths, declared ``max_tokens``, tenant, priority, slice,
    ``cancel_after_s`` and prefix ids.
    """
    h = hashlib.sha256()
    n = len(specs)
    h.update(str(n).encode())
    if n == 0:
        return h.hexdigest()
    h.update(np.fromiter((s.arrival_time_s for s in specs), float, n).tobytes())
    h.update(np.fromiter((s.num_prompt_tokens for s in specs), np.int64, n).tobytes())
    h.update(np.fromiter((s.num_output_tokens for s in specs), np.int64, n).tobytes())
    h.update(np.fromiter((-1 if s.max_tokens is None else s.max_tokens for s in specs),
                         np.int64, n).tobytes())
    h.update(np.fromiter((s.priority for s in specs), np.int64, n).tobytes())
    h.update(np.fromiter((np.nan if s.cancel_after_s is None else s.cancel_after_s
                          for s in specs), float, n).tobytes())
    h.update("\x1f".join(f"{s.tenant}\x1e{s.slice}\x1e{s.prefix_hash_ids}\x1e"
                         f"{s.prefix_block_tokens}" for s in specs).encode())
    if any(s.session_id is not None or s.n != 1 or s.cancel_when_streaming for s in specs):
        # multi-turn sessions (their chaining and think times), parallel sampling, total
        # time-outs: part of the workload only where used, so other keys stay as they were
        h.update("\x1f".join(f"{s.session_id}\x1e{s.turn_index}\x1e{s.think_time_s!r}\x1e"
                             f"{s.n}\x1e{s.use_beam_search}\x1e{s.cancel_when_streaming}"
                             for s in specs).encode())
    return h.hexdigest()


def cache_key(kind: str, payload: Mapping[str, Any]) -> str:
    """Hex SHA-256 of ``kind``, ``payload`` (canonical JSON), the cache format and the
    servesim version."""
    doc = {"kind": kind, "format": CACHE_FORMAT, "version": __version__, "payload": payload}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ResultCache:
    """A folder of ``<key>.json`` entries (``None`` folder: a cache that never hits).

    Parameters
    ----------
    folder : path or None
        Where entries live (created on the first write).
    enabled : bool
        ``False`` disables reads (a fresh run) but still writes new results.
    """

    def __init__(self, folder: str | os.PathLike | None, enabled: bool = True):
        self.folder = Path(folder) if folder is not None else None
        self.enabled = enabled and self.folder is not None
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The cached entry, or ``None`` (missing, unreadable, or the cache is disabled)."""
        if not self.enabled:
            self.misses += 1
            return None
        try:
            with open(self._path(key)) as f:
                val = json.load(f)
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return val

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` atomically."""
        if self.folder is None:
            return
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(value, f, default=_json_default)  # keep key order (table columns)
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def reader(self) -> ResultCache:
        """A read-only copy to send to workers (same folder, counters reset)."""
        c = ResultCache(self.folder, self.enabled)
        return c


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        f = float(o)
        return f if np.isfinite(f) else None
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
