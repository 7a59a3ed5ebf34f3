"""Which model a recorded run served: its id (``meta-llama/Llama-3.1-8B-Instruct``, a local
checkpoint path, a served name) resolved to the model catalog or to a Hugging Face
``config.json`` (:func:`resolve_model`)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from simulator.catalog.models import CATALOG, get_model
from simulator.observe.record import RecordedRun
from simulator.scenario.config import ScenarioError

__all__ = ["resolve_model"]


def _catalog_by_name(model_id: str) -> str | None:
    """The catalog model a local path or bare name stands for (``/models/Llama-3.1-8B-Instruct``,
    ``/data/hf/meta-llama/Llama-3.1-8B-Instruct``): its last two path parts, else its last
    part, equal (ignoring case) to a catalog Hugging Face id or alias, or to the part after
    the organisation of exactly one of them."""
    parts = [x for x in re.split(r"[\\/]+", model_id.strip()) if x]
    if not parts:
        return None
    if len(parts) >= 2:
        try:
            return get_model(f"{parts[-2]}/{parts[-1]}").name
        except ValueError:
            pass
    tail = parts[-1].lower()
    hits = {m.name for m in CATALOG.values()
            for a in (m.name, m.hf_id, *m.aliases) if a and a.lower().split("/")[-1] == tail}
    return hits.pop() if len(hits) == 1 else None


def _hf_cache_config(model_id: str) -> Path | None:
    """``config.json`` of a Hugging Face model id in the local hub cache (``$HF_HUB_CACHE``,
    ``$HF_HOME/hub``, ``~/.cache/huggingface/hub``): the snapshot ``refs/main`` names, else
    the newest snapshot holding one; None when absent."""
    if model_id.count("/") != 1 or model_id.startswith((".", "/", "~")):
        return None
    env = os.environ
    roots = [env.get("HF_HUB_CACHE"), env.get("HUGGINGFACE_HUB_CACHE"),
             str(Path(env["HF_HOME"]) / "hub") if env.get("HF_HOME") else None,
             str(Path.home() / ".cache" / "huggingface" / "hub")]
    folder = "models--" + model_id.replace("/", "--")
    for r in [x for x in roots if x]:
        d = Path(r) / folder
        ref = d / "refs" / "main"
        if ref.is_file():
            q = d / "snapshots" / ref.read_text().strip() / "config.json"
            if q.is_file():
                return q
        snaps = sorted((d / "snapshots").glob("*/config.json"), key=lambda q: q.stat().st_mtime)
        if snaps:
            return snaps[-1]
    return None


def resolve_model(model_id: str, run: RecordedRun) -> tuple[str, str]:
    """A model id the replay can load, and how it was found.

    In order: the model catalog by id or alias (or an existing ``config.json`` path); the
    catalog by the path's last parts (a local checkpoint folder named after the model); the
    model's ``config.json`` in the local Hugging Face hub cache; ``configs/model/<id>.json``
    under the run's repository root or any parent folder of the record; then
    ``model_configs/<name>/config.json`` there (``<name>`` the id's last part: the layout of
    the inference-perf campaigns' folders).

    Returns
    -------
    (str, str)
        The catalog id or a ``config.json`` path; a description (``catalog`` or the path).

    Raises
    ------
    ScenarioError
        When none of those has it, or its ``config.json`` cannot be modelled (one line).
    """
    try:
        m = get_model(model_id)
        return m.name, f"catalog {m.name}"
    except ValueError as e:
        if Path(model_id).expanduser().exists():
            raise ScenarioError(f"model {model_id!r} (from the record): {e}") from None
    by_name = _catalog_by_name(model_id)
    if by_name is not None:
        return by_name, f"catalog {by_name} (matched by the name of {model_id!r})"
    cached = _hf_cache_config(model_id)
    rel = f"configs/model/{model_id}.json"
    starts = [run.root] if run.root is not None else []
    starts += [run.path, *run.path.parents] if run.path.is_dir() else \
        [run.path.parent, *run.path.parent.parents]
    found = [(cached, "Hugging Face cache")] if cached is not None else []
    found += [(base / rel, f"{rel} under {base}") for base in starts if (base / rel).is_file()]
    tail = re.split(r"[\\/]+", model_id.strip())[-1]
    mc = f"model_configs/{tail}/config.json"
    found += [(base / mc, f"{mc} under {base}") for base in starts
              if tail and (base / mc).is_file()]
    if found:
        q, how = found[0]
        try:
            get_model(str(q))
        except ValueError as e:
            raise ScenarioError(f"model {model_id!r} (from the record, {how} {q}): "
                                f"{e}") from None
        return str(q), f"{how} {q}" if how == "Hugging Face cache" else how
    raise ScenarioError(f"model {model_id!r} (from the record) is not in the model catalog, the "
                        f"Hugging Face cache or at {rel} (or {mc}) under the run's folders; pass "
                        "--model ID|config.json")
