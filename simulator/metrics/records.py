"""Append-only run records: request outcomes, per-step rows, ITL samples, transitions.

Per-step rows arrive as plain tuples (single steps) and as numpy chunks (fast-forwarded
decode runs). Every :data:`STEP_CHUNK_ROWS` rows the pending rows are packed into one
columnar chunk (one int64 or float64 array per column, 128 bytes a step instead of ~1 KB
of Python tuples), so a million-request run keeps its step table in bounded memory; the
tidy DataFrame is built once, at the end. ITL samples are packed the same way.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..scheduling.state import FINAL, LEGAL_TRANSITIONS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

STEP_COLUMNS = ["replica_id", "step_index", "start_time_s", "step_time_s", "end_time_s",
                "batch_size", "num_prefill_tokens", "num_decode_tokens", "num_prefill_seqs",
                "num_decode_seqs", "num_waiting", "kv_blocks_used", "num_gpu_blocks",
                "num_preempted", "kv_tokens_used", "num_padding_seqs"]

#: Float columns of the step table (the others are int64).
STEP_FLOAT_COLUMNS = frozenset({"start_time_s", "step_time_s", "end_time_s"})

#: Rows (steps, or ITL samples) buffered before they are packed into one columnar chunk.
#: 65,536 rows of 16 columns is 8 MiB packed; the buffer of tuples it replaces is ~64 MiB.
STEP_CHUNK_ROWS = 65_536

REQUEST_COLUMNS = ["request_id", "replica_id", "tenant", "slice", "priority", "arrival_time_s",
                   "num_prompt_tokens", "num_output_tokens", "num_emitted_tokens",
                   "num_cached_prompt_tokens", "status", "reject_reason",
                   "first_scheduled_time_s", "first_token_time_s", "finish_time_s",
                   "exit_time_s", "num_preemptions", "n"]


class IllegalTransition(RuntimeError):
    """A request moved between statuses in a way DESIGN.md invariant 2 forbids."""


class RunRecorder:
    """Collects everything a run reports.

    Parameters
    ----------
    check_transitions : bool
        Verify every status change against the legal transitions and keep a log
        (``self.transitions``: (time_s, request_id, from, to)). Costs a little time.
    """

    def __init__(self, check_transitions: bool = False):
        self.check = check_transitions
        self.transitions: list[tuple] = []
        self.all_requests: list = []
        self.exit_time: dict[int, float] = {}
        self._itl_vals: list[float] = []
        self._itl_w: list[int] = []
        self._itl_chunks: list[tuple[np.ndarray, int]] = []
        self._itl_rows = 0
        self._itl_packed: list[tuple[np.ndarray, np.ndarray]] = []
        self._steps: list[tuple] = []
        self._step_chunks: list[dict] = []
        self._pending_rows = 0
        #: decode runs recorded through :meth:`add_step_chunk` (fast-forwards), a count
        self.num_step_chunks = 0
        self._packed: list[dict[str, np.ndarray]] = []
        self.prefix_hit_tokens = 0
        self.num_finished = 0

    # ------------------------------------------------------------------ lifecycle
    def transition(self, r, to: str, now: float) -> None:
        frm = r.status
        if self.check:
            if (frm, to) not in LEGAL_TRANSITIONS:
                raise IllegalTransition(f"request {r.request_id}: {frm} -> {to} at t={now}")
            self.transitions.append((now, r.request_id, frm, to))
        r.status = to

    def reject(self, r, now: float, reason: str) -> None:
        self.finish(r, now, "rejected", reason)

    def finish(self, r, now: float, status: str, reason: str) -> None:
        self.transition(r, status, now)
        r.reject_reason = reason if status == "rejected" else ""
        r.finish_time_s = now if status == "completed" else math.nan
        self.exit_time[r.request_id] = now
        self.num_finished += 1

    # ------------------------------------------------------------------ ITL
    def add_itl(self, value: float, weight: int) -> None:
        self._itl_vals.append(value)
        self._itl_w.append(weight)
        if len(self._itl_vals) >= STEP_CHUNK_ROWS:
            self._pack_itl()

    def add_itl_array(self, values: np.ndarray, weight: int) -> None:
        if len(values):
            self._itl_chunks.append((values, weight))
            self._itl_rows += len(values)
            if self._itl_rows >= STEP_CHUNK_ROWS:
                self._pack_itl()

    def _pack_itl(self) -> None:
        """Pack the buffered ITL samples into one (values, weights) pair of arrays."""
        vals = [np.asarray(self._itl_vals, dtype=float)]
        ws = [np.asarray(self._itl_w, dtype=np.int64)]
        for v, w in self._itl_chunks:
            vals.append(np.asarray(v, dtype=float))
            ws.append(np.full(len(v), w, dtype=np.int64))
        self._itl_packed.append((np.concatenate(vals), np.concatenate(ws)))
        self._itl_vals, self._itl_w, self._itl_chunks, self._itl_rows = [], [], [], 0

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """All inter-token gaps (seconds) with integer multiplicities.

        Order: packed chunks in the order they were packed, then each chunk's single
        samples before its array samples (deterministic for a given run).
        """
        self._pack_itl()
        vals = [v for v, _ in self._itl_packed]
        ws = [w for _, w in self._itl_packed]
        if len(self._itl_packed) > 1:
            self._itl_packed = [(np.concatenate(vals), np.concatenate(ws))]
        return self._itl_packed[0]

    # ------------------------------------------------------------------ steps
    def add_step(self, row: tuple) -> None:
        """One engine step: a tuple in :data:`STEP_COLUMNS` order."""
        self._steps.append(row)
        if len(self._steps) + self._pending_rows >= STEP_CHUNK_ROWS:
            self._pack_steps()

    def add_step_chunk(self, chunk: dict) -> None:
        """Several steps at once: ``{column: array}`` for every column of :data:`STEP_COLUMNS`."""
        self._step_chunks.append(chunk)
        self.num_step_chunks += 1
        self._pending_rows += len(chunk["step_index"])
        if len(self._steps) + self._pending_rows >= STEP_CHUNK_ROWS:
            self._pack_steps()

    @property
    def num_steps(self) -> int:
        """Steps recorded so far."""
        return (sum(len(p["step_index"]) for p in self._packed) + len(self._steps)
                + self._pending_rows)

    def _pack_steps(self) -> None:
        """Pack the buffered tuples and chunks into one columnar chunk (int64 / float64)."""
        if not self._steps and not self._step_chunks:
            return
        cols: dict[str, list] = {c: [] for c in STEP_COLUMNS}
        if self._steps:
            for c, v in zip(STEP_COLUMNS, zip(*self._steps)):
                cols[c].append(np.asarray(v))
        for ch in self._step_chunks:
            for c in STEP_COLUMNS:
                cols[c].append(np.asarray(ch[c]))
        self._packed.append({c: np.concatenate(v).astype(
            np.float64 if c in STEP_FLOAT_COLUMNS else np.int64, copy=False)
            for c, v in cols.items()})
        self._steps, self._step_chunks, self._pending_rows = [], [], 0

    def steps_frame(self) -> pd.DataFrame:
        """All steps as one DataFrame sorted by (replica_id, step_index).

        Columns are :data:`STEP_COLUMNS`: float64 for :data:`STEP_FLOAT_COLUMNS`, int64 for
        the others (an empty run gives empty float columns). The frame shares its column
        arrays with the recorder (no second copy of a large table): treat it as read-only.
        """
        import pandas as pd

        self._pack_steps()
        if not self._packed:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in STEP_COLUMNS})
        if len(self._packed) > 1:  # concatenate column by column, freeing chunks as we go
            merged = {}
            for c in STEP_COLUMNS:
                merged[c] = np.concatenate([p.pop(c) for p in self._packed])
            self._packed = [merged]
        data = self._packed[0]
        order = np.lexsort((data["step_index"], data["replica_id"]))
        if np.any(order[1:] < order[:-1]):  # not sorted yet: sort in place of the chunk
            for c in STEP_COLUMNS:
                data[c] = data[c][order]
        return pd.DataFrame({c: data[c] for c in STEP_COLUMNS}, copy=False)

    # ------------------------------------------------------------------ requests
    def requests_frame(self) -> pd.DataFrame:
        """One row per request that entered the run (:data:`REQUEST_COLUMNS`), by request_id."""
        import pandas as pd

        rows = []
        for r in self.all_requests:
            s = r.spec
            rows.append((r.request_id, r.replica_id, s.tenant, s.slice, s.priority,
                         r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens,
                         r.num_emitted, r.num_cached_prompt_tokens,
                         r.status if r.status in FINAL or r.status in ("waiting", "running")
                         else "waiting",
                         r.reject_reason, r.first_scheduled_time_s, r.first_token_time_s,
                         r.finish_time_s, self.exit_time.get(r.request_id, math.nan),
                         r.num_preemptions, r.num_seqs))
        df = pd.DataFrame.from_records(rows, columns=REQUEST_COLUMNS)
        return df.sort_values("request_id", kind="stable").reset_index(drop=True)
