"""The generated reference pages of the docs site (``docs/reference/``) are current and
complete: they equal a fresh run of ``docs/gen_reference.py``, and they list every key of the
scenario schema (and of the sweep and plan files) and every flag of every ``servesim``
command.

Completeness is checked against the schema and the parser walked here, independently of the
generator: the keys from pydantic's JSON schema (``model_json_schema``: ``$ref``, ``anyOf``,
``items``, ``additionalProperties``), not from ``model_fields``; the flags from the argparse
actions of :func:`simulator.cli.main.build_parser`, read from the page's own tables.
"""
from __future__ import annotations

import argparse
import re

import pytest
import yaml
from helpers import REPO_ROOT, load_file_module

from simulator.cli.main import build_parser
from simulator.planner.day import DayPlanSpec
from simulator.planner.spec import PlanSpec, QualityTable, SweepSpec
from simulator.planner.topology import TopologyPlanSpec
from simulator.scenario.config import Scenario

DOCS = REPO_ROOT / "docs"
ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (.*?) \| (.*?) \| (.*) \|$")


def _generator():
    return load_file_module(DOCS / "gen_reference.py", "gen_reference")


@pytest.fixture(scope="module")
def gen():
    return _generator()


@pytest.fixture(scope="module")
def rendered(gen):
    return gen.render()


def test_committed_pages_equal_a_fresh_generation(gen, rendered):
    stale = [name for name, text in rendered.items()
             if not gen.PAGES[name].exists() or gen.PAGES[name].read_text() != text]
    assert not stale, (f"docs/reference pages {stale} are stale: run "
                       "`python docs/gen_reference.py` and commit them")


def test_check_mode_names_a_stale_page(gen, tmp_path, monkeypatch, capsys):
    """``--check`` fails (exit 1) and names the page when one differs, and writes nothing."""
    pages = {name: tmp_path / path.name for name, path in gen.PAGES.items()}
    for name, path in gen.PAGES.items():
        pages[name].write_text(path.read_text())
    pages["cli"].write_text(pages["cli"].read_text() + "\nedited by hand\n")
    monkeypatch.setattr(gen, "PAGES", pages)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "cli.md" in capsys.readouterr().out
    assert pages["cli"].read_text().endswith("edited by hand\n")  # --check writes nothing


# --------------------------------------------------------------------------------------------
# schema keys, from the JSON schema
# --------------------------------------------------------------------------------------------
def schema_leaves(model) -> dict[str, dict]:
    """Every leaf key of a model's JSON schema (``a.b``, ``pools[].x``, ``m.*.x`` for a
    mapping to models) -> its property schema plus ``required`` (bool)."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})

    def resolve(node):
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def objects(node, suffix=""):
        node = resolve(node)
        if "properties" in node:
            return [(suffix, node)]
        found = []
        for alt in node.get("anyOf", []):
            found += objects(alt, suffix)
        if node.get("type") == "array" and "items" in node:
            found += objects(node["items"], suffix + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += objects(node["additionalProperties"], suffix + ".*")
        return found

    leaves = {}

    def walk(obj, prefix):
        for name, prop in obj["properties"].items():
            subs = objects(prop)
            for suffix, sub in subs:
                walk(sub, f"{prefix}{name}{suffix}.")
            if not subs:
                leaves[prefix + name] = dict(prop, required=name in obj.get("required", []))

    walk(resolve(schema), "")
    return leaves


def page_rows(text: str) -> dict[str, tuple[str, str, str, str]]:
    """Key -> (type, default, unit, description) of every key table row of a page, with a
    ``<placeholder>`` mapping key written ``*``."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "Key":
            key = re.sub(r"<[^>]+>", "*", m.group(1))
            assert key not in rows, f"{key} listed twice"
            rows[key] = m.group(2, 3, 4, 5)
    return rows


def _file_sections(text: str) -> dict[str, str]:
    """The plan-files page cut at its ``## <title> (`Model`)`` headings: model name -> text."""
    parts = re.split(r"^## .*\(`(\w+)`\)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.fixture(scope="module")
def schema_pages():
    """(model, its rows on the committed page) for the scenario and each file schema."""
    files = _file_sections((DOCS / "reference" / "plan-files.md").read_text())
    out = [(Scenario, page_rows((DOCS / "reference" / "scenario.md").read_text()))]
    for model in (SweepSpec, PlanSpec, QualityTable, TopologyPlanSpec, DayPlanSpec):
        assert model.__name__ in files, f"plan-files.md has no section for {model.__name__}"
        out.append((model, page_rows(files[model.__name__])))
    return out


def test_every_schema_key_is_listed_once_and_nothing_else(schema_pages):
    for model, rows in schema_pages:
        leaves = schema_leaves(model)
        assert len(leaves) > 3, model
        missing = sorted(set(leaves) - set(rows))
        extra = sorted(set(rows) - set(leaves))
        assert not missing and not extra, f"{model.__name__}: missing {missing}, extra {extra}"


def test_scenario_keys_cover_the_sections_a_user_writes():
    """A sanity anchor independent of both walkers: keys of the shipped scenarios exist."""
    leaves = schema_leaves(Scenario)
    for key in ("scheduler.max_num_seqs", "kv_cache.block_size", "workload.trace",
                "pools[].kv_transfer.bandwidth_bytes_per_s", "seed",
                "speculative.acceptance_by_slice.*.acceptance_rate",
                "scheduler.admission.degrade[].when.kv_occupancy"):
        assert key in leaves


def test_defaults_and_required_keys_match_the_schema(schema_pages):
    """The default column reads back (as YAML) to the JSON schema's default; keys without one
    say ``required`` exactly when the schema requires them."""
    for model, rows in schema_pages:
        for key, prop in schema_leaves(model).items():
            _type, default, _unit, _ = rows[key]
            if "default" in prop:
                shown = yaml.safe_load(default.strip("`").replace("&#124;", "|"))
                assert shown == prop["default"], (model.__name__, key, default, prop["default"])
            elif prop["required"]:
                assert default == "required", (model.__name__, key, default)


def test_units_follow_the_key_names(schema_pages):
    """Spot checks of the unit column: seconds, bytes/s, tokens, GiB (from the description)."""
    rows = schema_pages[0][1]
    assert rows["slo.ttft_s"][2] == "s"
    assert rows["hardware.interconnect.bandwidth_bytes_per_s"][2] == "bytes/s"
    assert rows["scheduler.max_num_batched_tokens"][2] == "tokens"
    assert rows["kv_cache.swap_space_gb"][2] == "GiB"  # its description says GiB (2**30)
    assert rows["cluster.num_replicas"][2].strip() == ""


def test_every_note_names_a_real_key():
    """A note for a renamed or removed key fails here instead of silently vanishing."""
    notes = yaml.safe_load((DOCS / "scenario_notes.yaml").read_text())
    leaves = schema_leaves(Scenario)
    defs = Scenario.model_json_schema()["$defs"]
    for key in notes:
        cls, _, field = key.partition(".")
        if cls in defs and field in defs[cls]["properties"]:
            continue
        assert key in leaves, f"docs/scenario_notes.yaml: {key} is not a scenario key"


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------
def parser_flags() -> dict[str, set[str]]:
    """``servesim run`` -> {"--trace", "-o", "--output", "SCENARIO", ...} for every command,
    straight from the argparse actions (help excluded)."""
    out = {}

    def walk(parser, path):
        names = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif action.option_strings:
                names |= {o for o in action.option_strings if o not in ("-h", "--help")}
            else:
                names.add(action.metavar or action.dest.upper())
        out[path] = names

    walk(build_parser(), "servesim")
    return out


def page_flags(text: str) -> dict[str, set[str]]:
    """The same from ``docs/reference/cli.md``: per ``servesim ...`` heading, the code spans of
    the first column of its argument table."""
    out = {}
    parts = re.split(r"^#{2,4} (servesim[\w -]*)$", text, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2]):
        names = set()
        for line in body.splitlines():
            if line.startswith("| `") and not line.startswith("| [`"):
                first = line.split(" | ")[0]
                names |= {n.removesuffix(" ...") for n in re.findall(r"`([^`]+)`", first)}
        out[heading.strip()] = names
    return out


def test_every_command_and_flag_is_listed():
    expected = parser_flags()
    shown = page_flags((DOCS / "reference" / "cli.md").read_text())
    assert set(shown) == set(expected)
    assert len(expected) >= 15  # 11 commands, calibrate's 4, the top level
    for command, flags in expected.items():
        assert shown[command] == flags, (command, sorted(flags ^ shown[command]))
    assert {"--set", "--trace", "-o", "--output", "SCENARIO"} <= shown["servesim run"]


def test_benchmarks_readme_names_every_benchmark():
    """``benchmarks/README.md`` has a table row for every file in ``benchmarks/``."""
    bench = REPO_ROOT / "benchmarks"
    text = (bench / "README.md").read_text()
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE))
    files = {p.name for p in bench.iterdir() if p.is_file() and p.suffix in (".py", ".yaml")}
    assert files, "no benchmark found"
    assert files - rows <= {"public_summaries.yaml"}, sorted(files - rows)
    assert "public_summaries.yaml" in text
    assert rows <= files, sorted(rows - files)


def test_module_map_lists_every_module_once():
    text = (DOCS / "reference" / "modules.md").read_text()
    listed = re.findall(r"^\| `((?:simulator|calibration)/[^`]+\.py)` \|", text, re.MULTILINE)
    assert len(listed) == len(set(listed))
    on_disk = {p.relative_to(REPO_ROOT).as_posix()
               for package in ("simulator", "calibration")
               for p in (REPO_ROOT / package).rglob("*.py") if "_data" not in p.parts}
    assert set(listed) == on_disk
