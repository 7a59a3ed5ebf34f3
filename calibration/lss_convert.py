"""Convert LLMServingSim's tables into servesim's families (for :mod:`calibration.import_lss`).

GEMM, elementwise, attention (prefill, decode), MoE and the sampler, each with the ``changes``
lines its provenance record carries; :mod:`calibration.import_lss`'s docstring describes every
rule. Needs numpy, pandas and scipy (no torch).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .lss_profile import ImportErrorLSS, Profile

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

#: LLMServingSim dense layer -> servesim GEMM op (``ModelSpec.dense_gemm_shapes`` keys)
GEMM_LAYERS = {"qkv_proj": "qkv_proj", "o_proj": "o_proj", "gate_up_proj": "mlp_gate_up",
               "down_proj": "mlp_down"}
#: dense layers summed into one ``elementwise`` row, with their calls per layer
ELEMENTWISE_LAYERS = {"layernorm": 2, "rotary_emb": 1, "act_fn": 1, "qk_norm": 2}
#: output part column of each elementwise layer
_PART_COLUMN = {"layernorm": "rmsnorm_s", "rotary_emb": "rope_s", "act_fn": "act_s",
                "qk_norm": "qk_norm_s"}
#: dense layers that run once per step (not per layer): not imported
PER_STEP_LAYERS = ("embedding", "final_layernorm")
#: vLLM's attention backend for a bf16 KV cache on CUDA GPUs other than sm100 (module doc)
ATTENTION_KERNEL = "vllm_flash_attn"
MOE_KERNEL = "vllm_fused_moe"

COLUMNS = {
    "gemm": ["dtype", "m", "n", "k", "median_s", "model", "tp", "op"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel", "batch", "q", "start", "median_s", "model", "tp"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel", "batch", "ctx_mean", "median_s", "model", "tp"],
    "elementwise": ["dtype", "hidden", "intermediate", "q_heads", "kv_heads", "head_dim",
                    "tokens", "median_s", "rmsnorm_s", "rope_s", "act_s", "qk_norm_s", "model",
                    "tp"],
    "moe": ["dtype", "distribution", "kernel", "num_tokens", "hidden", "inter", "topk",
            "num_experts", "moe_tp", "moe_ep", "median_s", "model"],
    "sampler": ["vocab", "rows", "median_s", "model"],
}
#: key + grid columns (the identity of a row) per family
IDENTITY = {
    "gemm": ["dtype", "m", "n", "k"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel", "batch", "q", "start"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel", "batch", "ctx_mean"],
    "elementwise": ["dtype", "hidden", "intermediate", "q_heads", "kv_heads", "head_dim",
                    "tokens"],
    "moe": ["dtype", "distribution", "kernel", "num_tokens", "hidden", "inter", "topk",
            "num_experts", "moe_tp", "moe_ep"],
    "sampler": ["vocab", "rows"],
}
_STRING = {"dtype", "kv_dtype", "kernel", "distribution", "model", "op"}
#: size axis per family for the (report-only) outlier flag
SIZE_AXIS = {"gemm": "m", "attention_prefill": "q", "attention_decode": "ctx_mean",
              "elementwise": "tokens", "moe": "num_tokens"}


def _median_dupes(df: pd.DataFrame, keys: list[str], path: Path, notes: list) -> pd.DataFrame:
    n0 = len(df)
    g = df.groupby(keys, sort=True)["time_us"].median().reset_index()
    if len(g) < n0:
        notes.append(f"{path.name}: {n0 - len(g)} repeated measurements of one point merged "
                     "(median)")
    return g


def convert_dense(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """GEMM and elementwise rows of one ``dense.csv`` (module docstring).

    Returns
    -------
    (gemm rows, elementwise rows, notes, skipped layers)

    Raises
    ------
    ValueError
        (``ImportErrorLSS``) a projection the model does not have at this TP.
    """
    import pandas as pd

    notes: list[str] = []
    m = prof.model
    df = _median_dupes(df, ["layer", "tokens"], path, notes)
    shapes = m.dense_gemm_shapes(tp)
    layers = sorted(set(df["layer"]))
    gemm = []
    for layer in layers:
        if layer not in GEMM_LAYERS:
            continue
        op = GEMM_LAYERS[layer]
        if op not in shapes:
            raise ImportErrorLSS(f"{path}: layer {layer} measured, but {m.name} has no {op} "
                                 f"GEMM at TP {tp} (its GEMMs: {', '.join(shapes)})")
        k, n = shapes[op]
        d = df[df["layer"] == layer]
        gemm.append(pd.DataFrame({"dtype": prof.weight_dtype, "m": d["tokens"], "n": n, "k": k,
                                  "median_s": d["time_us"] / 1e6, "model": m.hf_id or m.name,
                                  "tp": tp, "op": layer}))
    for op in shapes:
        lss = {v: k for k, v in GEMM_LAYERS.items()}.get(op)
        if lss is None or lss not in layers:
            notes.append(f"{path.name}: {m.name}'s {op} GEMM not measured (no "
                         f"{lss or op} rows)")
    gemm_df = pd.concat(gemm, ignore_index=True) if gemm else pd.DataFrame(
        columns=COLUMNS["gemm"])
    # elementwise: the parts this model runs
    need = ["layernorm", "rotary_emb"]
    if m.num_dense_layers and "act_fn" in layers:
        need.append("act_fn")
    elif m.num_dense_layers:
        notes.append(f"{path.name}: no act_fn rows: elementwise rows leave the MLP "
                     "activation out")
    if getattr(m, "qk_norm", False):
        need.append("qk_norm")
    ew = pd.DataFrame()
    absent = [x for x in need if x not in layers]
    if absent:
        notes.append(f"{path.name}: elementwise not imported: no {', '.join(absent)} rows")
    else:
        piv = df[df["layer"].isin(need)].pivot(index="tokens", columns="layer",
                                               values="time_us")
        full = piv.dropna()
        if len(full) < len(piv):
            notes.append(f"{path.name}: {len(piv) - len(full)} token counts lack one of "
                         f"{', '.join(need)}: no elementwise row there")
        qh, kvh, hd = m.attention_heads(tp)
        inter = m.dense_mlp_intermediate_size // tp if "act_fn" in need else 0
        ew = pd.DataFrame({"dtype": prof.act_dtype, "hidden": m.hidden_size,
                           "intermediate": inter, "q_heads": qh, "kv_heads": kvh,
                           "head_dim": hd, "tokens": full.index.to_numpy()})
        total = np.zeros(len(full))
        for c in _PART_COLUMN.values():
            ew[c] = np.nan
        for layer in need:
            part = ELEMENTWISE_LAYERS[layer] * full[layer].to_numpy(float) / 1e6
            ew[_PART_COLUMN[layer]] = part
            total += part
        ew["median_s"] = total
        ew["model"] = m.hf_id or m.name
        ew["tp"] = tp
    skipped = [x for x in layers if x not in GEMM_LAYERS and x not in need]
    return gemm_df, ew, notes, skipped


def convert_per_sequence(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                         ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """LM-head GEMM rows and sampler rows of one ``per_sequence.csv``."""
    import pandas as pd

    notes: list[str] = []
    m = prof.model
    df = _median_dupes(df, ["layer", "sequences"], path, notes)
    lm = df[df["layer"] == "lm_head"]
    if lm.empty:
        notes.append(f"{path.name}: no lm_head rows")
    gemm = pd.DataFrame({"dtype": prof.weight_dtype, "m": lm["sequences"],
                         "n": m.vocab_size // tp, "k": m.hidden_size,
                         "median_s": lm["time_us"] / 1e6, "model": m.hf_id or m.name,
                         "tp": tp, "op": "lm_head"})
    sm = df[df["layer"] == "sampler"]
    samp = pd.DataFrame({"vocab": m.vocab_size, "rows": sm["sequences"],
                         "median_s": sm["time_us"] / 1e6, "model": m.hf_id or m.name})
    other = sorted(set(df["layer"]) - {"lm_head", "sampler"})
    if other:
        notes.append(f"{path.name}: layers {', '.join(other)} not imported")
    return gemm.reset_index(drop=True), samp.reset_index(drop=True), notes


def _attn_keys(prof: Profile, tp: int) -> dict:
    m = prof.model
    qh, kvh, hd = m.attention_heads(tp)
    win = 0
    wins = m.layer_attention_windows()
    if wins and wins[0]:
        win = int(wins[0])
    return {"dtype": prof.act_dtype, "kv_dtype": prof.kv_dtype, "q_heads": qh,
            "kv_heads": kvh, "head_dim": hd, "window": win, "kernel": ATTENTION_KERNEL}


def convert_attention(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                      ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """Pure-prefill and pure-decode rows of one ``attention.csv`` (module docstring).

    Returns
    -------
    (prefill rows, decode rows, mixed source rows (microseconds, as read), notes)
    """
    import pandas as pd

    notes: list[str] = []
    cols = ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode"]
    df = _median_dupes(df, cols, path, notes)
    empty = (df["prefill_chunk"] == 0) & (df["n_decode"] == 0)
    if empty.any():
        notes.append(f"{path.name}: {int(empty.sum())} rows with neither a prefill chunk nor "
                     "decodes dropped")
    keys = _attn_keys(prof, tp)
    name = prof.model.hf_id or prof.model.name
    dec = df[(df["prefill_chunk"] == 0) & (df["n_decode"] > 0)]
    decode = pd.DataFrame({**keys, "batch": dec["n_decode"], "ctx_mean": dec["kv_decode"] + 1,
                           "median_s": dec["time_us"] / 1e6, "model": name, "tp": tp})
    pre = df[(df["n_decode"] == 0) & (df["prefill_chunk"] > 0)]
    prefill = pd.DataFrame({**keys, "batch": 1, "q": pre["prefill_chunk"],
                            "start": pre["kv_prefill"], "median_s": pre["time_us"] / 1e6,
                            "model": name, "tp": tp})
    mixed = df[(df["prefill_chunk"] > 0) & (df["n_decode"] > 0)]
    return prefill.reset_index(drop=True), decode.reset_index(drop=True), \
        mixed.reset_index(drop=True), notes


def mixed_attention_check(df: pd.DataFrame) -> dict:
    """How well ``prefill + decode`` predicts the mixed rows of one ``attention.csv``.

    For every mixed row (a chunk of ``prefill_chunk`` tokens after ``kv_prefill`` cached ones
    plus ``n_decode`` decodes at ``kv_decode``) whose pure-prefill row ``(prefill_chunk,
    kv_prefill, 0, 0)`` and pure-decode row ``(0, 0, n_decode, kv_decode)`` were measured,
    ``ratio = measured / (prefill + decode)``.

    Returns
    -------
    dict
        ``rows`` (mixed rows), ``paired``, ``ratio_median``, ``ratio_p10``, ``ratio_p90``,
        ``abs_err_median``, ``abs_err_p90`` (|ratio - 1|), rounded to 4 decimals.
    """
    import pandas as pd

    pre = df[(df["n_decode"] == 0) & (df["prefill_chunk"] > 0)].set_index(
        ["prefill_chunk", "kv_prefill"])["time_us"]
    dec = df[(df["prefill_chunk"] == 0) & (df["n_decode"] > 0)].set_index(
        ["n_decode", "kv_decode"])["time_us"]
    mix = df[(df["prefill_chunk"] > 0) & (df["n_decode"] > 0)]
    if mix.empty:
        return {"rows": 0, "paired": 0}
    tp = pre.reindex(pd.MultiIndex.from_frame(mix[["prefill_chunk", "kv_prefill"]])).to_numpy()
    td = dec.reindex(pd.MultiIndex.from_frame(mix[["n_decode", "kv_decode"]])).to_numpy()
    ok = np.isfinite(tp) & np.isfinite(td)
    r = mix["time_us"].to_numpy(float)[ok] / (tp[ok] + td[ok])
    out = {"rows": len(mix), "paired": int(ok.sum())}
    if ok.any():
        e = np.abs(r - 1.0)
        out.update({"ratio_median": round(float(np.median(r)), 4),
                    "ratio_p10": round(float(np.percentile(r, 10)), 4),
                    "ratio_p90": round(float(np.percentile(r, 90)), 4),
                    "abs_err_median": round(float(np.median(e)), 4),
                    "abs_err_p90": round(float(np.percentile(e, 90)), 4)})
    return out


def convert_moe(prof: Profile, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list[str]]:
    """``balanced`` MoE rows of ``tp1/moe.csv`` (module docstring)."""
    import pandas as pd

    notes: list[str] = []
    m = prof.model
    if not m.is_moe:
        raise ImportErrorLSS(f"{path}: MoE rows, but {m.name} has no experts")
    df = _median_dupes(df, ["tokens", "activated_experts"], path, notes)
    e, k = int(m.num_experts), int(m.experts_per_token)
    full = np.minimum(e, df["tokens"].to_numpy() * k)
    bal = df[df["activated_experts"].to_numpy() == full]
    dropped = len(df) - len(bal)
    if dropped:
        notes.append(f"{path.name}: {dropped} rows with fewer activated experts than uniform "
                     f"routing touches (min({e}, tokens x {k})) skipped: the moe family has no "
                     "activated-experts axis")
    out = pd.DataFrame({"dtype": prof.weight_dtype, "distribution": "balanced",
                        "kernel": MOE_KERNEL, "num_tokens": bal["tokens"],
                        "hidden": m.hidden_size, "inter": m.intermediate_size, "topk": k,
                        "num_experts": e, "moe_tp": 1, "moe_ep": 1,
                        "median_s": bal["time_us"] / 1e6, "model": m.hf_id or m.name})
    return out.reset_index(drop=True), notes


def fit_sampler_line(rows, t_s) -> dict:
    """Least-squares line ``t = a + b x rows`` through sampler times, with leave-one-out error.

    The fit minimises relative error (weights ``1 / t``), so small and large batches count
    alike. Each point is held out in turn, the line refitted on the rest and the point
    predicted; also reported: the leave-one-out error of linear interpolation in ``rows``
    between the remaining neighbours (interior points only), i.e. of using the table itself.

    Returns
    -------
    dict
        ``a_s``, ``b_s_per_row``, ``points``, ``rows_range``, ``loo_line_median``,
        ``loo_line_p90``, ``loo_line_max``, ``loo_interp_median``, ``loo_interp_p90``
        (relative errors |pred / measured - 1|).
    """
    x = np.asarray(rows, float)
    y = np.asarray(t_s, float)
    o = np.argsort(x, kind="mergesort")
    x, y = x[o], y[o]
    a = np.column_stack([np.ones_like(x), x]) / y[:, None]
    coef = np.linalg.lstsq(a, np.ones_like(y), rcond=None)[0]
    out = {"a_s": float(f"{coef[0]:.6g}"), "b_s_per_row": float(f"{coef[1]:.6g}"),
           "points": len(x), "rows_range": [int(x.min()), int(x.max())]}
    if len(x) >= 3:
        loo, interp = [], []
        for i in range(len(x)):
            keep = np.arange(len(x)) != i
            c = np.linalg.lstsq(a[keep], np.ones(keep.sum()), rcond=None)[0]
            loo.append(abs((c[0] + c[1] * x[i]) / y[i] - 1.0))
            if 0 < i < len(x) - 1:
                interp.append(abs(np.interp(x[i], x[keep], y[keep]) / y[i] - 1.0))
        loo = np.asarray(loo)
        out.update({"loo_line_median": round(float(np.median(loo)), 4),
                    "loo_line_p90": round(float(np.percentile(loo, 90)), 4),
                    "loo_line_max": round(float(loo.max()), 4)})
        if interp:
            out.update({"loo_interp_median": round(float(np.median(interp)), 4),
                        "loo_interp_p90": round(float(np.percentile(interp, 90)), 4)})
    return out


def flag_outliers(family: str, df: pd.DataFrame) -> int:
    """Points the aiconfigurator import's outlier rule would drop (reported, not dropped)."""
    from .import_aic import OUTLIER_FACTOR, _isotonic_keep
    axis = SIZE_AXIS.get(family)
    if axis is None or df.empty:
        return 0
    line = [c for c in IDENTITY[family] if c != axis]
    n = 0
    for _, g in df.sort_values(line + [axis], kind="mergesort").groupby(line, sort=False):
        if len(g) >= 4:
            n += int((~_isotonic_keep(g["median_s"].to_numpy(float), OUTLIER_FACTOR)).sum())
    return n


def finish_table(family: str, parts: list[pd.DataFrame], notes: list) -> pd.DataFrame:
    """One family's rows from all its parts: the rows measured at one shape by several
    profiles merged (a note appended to ``notes``), columns typed, sorted by identity."""
    import pandas as pd

    parts = [p for p in parts if p is not None and len(p)]
    if not parts:
        return pd.DataFrame(columns=COLUMNS[family])
    df = pd.concat(parts, ignore_index=True)
    cols = COLUMNS[family]
    for c in cols:
        if c not in df.columns:
            df[c] = np.nan
    ident = IDENTITY[family]
    dup = df.duplicated(ident, keep=False)
    if dup.any():
        agg = {c: ("median" if c not in _STRING else (lambda s: ",".join(sorted(set(s)))))
               for c in cols if c not in ident}
        if "tp" in agg:
            agg["tp"] = "min"
        n0 = len(df)
        df = df.groupby(ident, sort=False, as_index=False).agg(agg)
        notes.append(f"{n0 - len(df)} rows measured at the same shape by several profiles "
                     "merged (median time; model/op names joined)")
    df = df[cols].copy()
    for c in cols:
        if c in _STRING:
            df[c] = df[c].fillna("").astype(str)
        elif c.endswith("_s"):
            df[c] = df[c].astype(float)
        else:
            df[c] = df[c].astype("int64")
    return df.sort_values(ident, kind="mergesort").reset_index(drop=True)


#: notes every attention table carries (decode and prefill rows alike)
_ATTENTION_NOTES = (
    "the whole vLLM Attention module: KV-cache write of the new tokens plus the attention kernel",
    ("kernel = vllm_flash_attn: not recorded by the profile; vLLM 0.19's default backend for a "
     "bf16 KV cache on CUDA GPUs other than sm100 (vllm/platforms/cuda.py "
     "_get_backend_priorities)"),
    "mixed rows (prefill chunk + decodes in one call) not stored; see mixed_attention_check",
)

#: what the conversion changed, per family (each table record's ``changes``)
CHANGES = {
    "gemm": ["time_us -> median_s seconds (/ 1e6)",
             ("dense.csv qkv_proj, o_proj, gate_up_proj, down_proj at tokens -> (m = tokens, "
              "n, k) with (k, n) the model's projection at the TP shard "
              "(ModelSpec.dense_gemm_shapes); op = the source layer name"),
             ("per_sequence.csv lm_head (vLLM LogitsProcessor: the LM-head GEMM over the "
              "sampled rows plus its small epilogue, used as it is) -> (m = sequences, "
              "n = vocab / TP, k = hidden), op = lm_head")],
    "elementwise": ["time_us -> median_s seconds (/ 1e6)",
                    ("median_s = 2 x layernorm + rotary_emb + act_fn (+ 2 x qk_norm) at the "
                     "same tokens: layernorm is the per-call mean of the decoder layer's two "
                     "RMSNorm calls (input, post-attention with the residual add fused), "
                     "qk_norm the mean of the q and k head norms; parts in rmsnorm_s (2 x "
                     "layernorm), rope_s, act_s, qk_norm_s (2 x qk_norm)"),
                    ("keys at the TP shard: intermediate = I / TP (0 for MoE models, whose "
                     "activation runs inside the fused-MoE kernel), q_heads = H / TP, "
                     "kv_heads = K / TP; qk_norm is measured at TP 1 and copied to other TP "
                     "folders by the profiler (tp_stable), so TP > 1 rows keep the TP-1 "
                     "head count's qk_norm time"),
                    "embedding and final_layernorm (once per step, not per layer) not imported"],
    "attention_decode": ["time_us -> median_s seconds (/ 1e6)",
                         ("rows with prefill_chunk = 0: batch = n_decode, ctx_mean = kv_decode "
                          "+ 1 (each decode request is one new token after kv_decode cached "
                          "ones; the kernel attends kv_decode + 1 tokens, the new one "
                          "included)"),
                         *_ATTENTION_NOTES],
    "attention_prefill": ["time_us -> median_s seconds (/ 1e6)",
                          ("rows with n_decode = 0: batch = 1, q = prefill_chunk, start = "
                           "kv_prefill (tokens cached before the chunk)"),
                          *_ATTENTION_NOTES],
    "moe": ["time_us -> median_s seconds (/ 1e6)",
            ("tp1/moe.csv rows with activated_experts = min(num_experts, tokens x topk) "
             "(forced cyclic routing over that many experts = uniform routing over all) -> "
             "distribution balanced, num_tokens = tokens, inter = the expert's intermediate "
             "size, moe_tp = moe_ep = 1"),
            ("time of the whole sparse-MoE block: router gate GEMM (hidden x num_experts) and "
             "the fused-MoE kernel with the forged routing in place of the top-k selection; a "
             "caller that adds the router GEMM separately counts it twice")],
    "sampler": ["time_us -> median_s seconds (/ 1e6)",
                ("per_sequence.csv sampler (vLLM V1 Sampler, greedy, one token per sequence) "
                 "-> rows = sequences, vocab = the model's full vocabulary (the profiler "
                 "measures it at TP 1 and copies it to other TP folders); from the lowest TP "
                 "folder"),
                "not a query family of simulator.perf.tables.sets: read it with read_sampler()"],
}

