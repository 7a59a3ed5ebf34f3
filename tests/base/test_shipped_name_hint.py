"""A mistyped shipped scenario, sweep or plan name says which shipped names it could mean
(``difflib`` closest matches), or lists them all; a path with a folder part says only where
it looked."""
from __future__ import annotations

import difflib

import pytest

from simulator.base.resources import data_dir, find_yaml_file


def _shipped() -> list[str]:
    return sorted(f.stem for f in data_dir("scenarios").glob("*.yaml"))


def test_a_near_miss_names_the_closest_shipped_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        find_yaml_file("defualt")
    close = difflib.get_close_matches("defualt", _shipped(), n=3)
    assert close[0] == "default"
    assert str(e.value).endswith("; did you mean " + " or ".join(repr(c) for c in close) + "?")


def test_a_name_like_none_lists_every_shipped_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        find_yaml_file("zzzzqqqq", what="plan")
    assert str(e.value).startswith("plan file 'zzzzqqqq' not found (looked in: ")
    assert str(e.value).endswith(f"; {data_dir('scenarios')} holds: " + ", ".join(_shipped()))


def test_a_path_says_only_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        find_yaml_file("./defualt")
    assert "did you mean" not in str(e.value) and "holds" not in str(e.value)
