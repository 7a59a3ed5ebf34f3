"""Append-only run records: request outcomes, per-step rows, ITL samples, transitions.

Per-step rows are kept as plain tuples for single steps and as numpy chunks for
fast-forwarded decode runs, and turned into one tidy DataFrame at the end.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..scheduling.state import FINAL, LEGAL_TRANSITIONS

STEP_COLUMNS = ["replica_id", "step_index", "start_time_s", "step_time_s", "end_time_s",
                "batch_size", "num_prefill_tokens", "num_decode_tokens", "num_prefill_seqs",
                "num_decode_seqs", "num_waiting", "kv_blocks_used", "num_gpu_blocks",
                "num_preempted", "kv_tokens_used", "num_padding_seqs"]

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
        self._steps: list[tuple] = []
        self._step_chunks: list[dict] = []
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

    def add_itl_array(self, values: np.ndarray, weight: int) -> None:
        if len(values):
            self._itl_chunks.append((values, weight))

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """All inter-token gaps (seconds) with integer multiplicities."""
        vals = [np.asarray(self._itl_vals, dtype=float)]
        ws = [np.asarray(self._itl_w, dtype=np.int64)]
        for v, w in self._itl_chunks:
            vals.append(np.asarray(v, dtype=float))
            ws.append(np.full(len(v), w, dtype=np.int64))
        return np.concatenate(vals), np.concatenate(ws)

    # ------------------------------------------------------------------ steps
    def add_step(self, row: tuple) -> None:
        self._steps.append(row)

    def add_step_chunk(self, chunk: dict) -> None:
        self._step_chunks.append(chunk)

    def steps_frame(self) -> pd.DataFrame:
        """All steps as one DataFrame sorted by (replica_id, step_index)."""
        cols: dict[str, list] = {c: [] for c in STEP_COLUMNS}
        if self._steps:
            arr = list(zip(*self._steps))
            for c, v in zip(STEP_COLUMNS, arr):
                cols[c].append(np.asarray(v))
        for ch in self._step_chunks:
            for c in STEP_COLUMNS:
                cols[c].append(np.asarray(ch[c]))
        if not cols["step_index"]:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in STEP_COLUMNS})
        data = {c: np.concatenate(v) for c, v in cols.items()}
        order = np.lexsort((data["step_index"], data["replica_id"]))
        return pd.DataFrame({c: v[order] for c, v in data.items()})

    # ------------------------------------------------------------------ requests
    def requests_frame(self) -> pd.DataFrame:
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
