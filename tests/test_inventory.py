"""opscreen inventory: the scan verified by pytest collection (fixture suites, no torch)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from opscreen.assets import inventory as inv_mod
from opscreen.assets.inventory import build_inventory, dump_inventory, inventory_dict, load_inventory
from opscreen.commands import inventory as inventory_cmd
from opscreen.errors import UsageError
from opscreen.gitinfo import suite_revision

SUITES = Path(__file__).parent / "fixtures" / "suites"
A, B, BADCONF, MARKERS = SUITES / "inv_a", SUITES / "inv_b", SUITES / "inv_badconf", SUITES / "markers"


def run_command(*argv: str) -> int:
    """The command module as the CLI runs it (parser + run), UsageError -> 2."""
    p = argparse.ArgumentParser(prog="opscreen inventory")
    inventory_cmd.add_arguments(p)
    try:
        return inventory_cmd.run(p.parse_args(list(argv)))
    except UsageError:
        return 2


def kinds(data: dict) -> set[tuple]:
    return {(d["checkout"], d["kind"], d["file"], d.get("test"), d.get("op")) for d in data["disagreements"]}


@pytest.fixture(scope="module")
def two_checkouts(tmp_path_factory) -> dict:
    cache = tmp_path_factory.mktemp("cache")
    inv = build_inventory([A, B], jobs=2, timeout=60, cache_dir=cache)
    return inventory_dict(inv)


def test_disagreements_between_scan_and_collection(two_checkouts):
    k = kinds(two_checkouts)
    assert ("inv_a", "collect-error", "benchmark/test_broken_import.py", None, None) in k
    assert ("inv_a", "test-not-collected", "benchmark/test_dynamic.py", "test_ghost", None) in k
    assert ("inv_a", "marker-not-scanned", "benchmark/test_dynamic.py", "test_dynamic_mark", "dyn_op") in k
    assert len(k) == 3  # checkout B agrees everywhere
    err = next(d for d in two_checkouts["disagreements"] if d["kind"] == "collect-error")
    assert err["detail"] == "ModuleNotFoundError: No module named 'opscreen_fixture_module_that_does_not_exist'"


def test_ops_verified_by_and_checkouts(two_checkouts):
    ops = two_checkouts["ops"]
    assert list(ops) == sorted(ops)
    assert set(ops) == {"add", "add_", "broken", "dyn_op", "ghost", "mm", "mul", "slow_op"}
    assert ops["add"]["checkouts"] == ["inv_a", "inv_b"]
    assert ops["mm"]["checkouts"] == ["inv_a", "inv_b"]
    assert ops["add_"]["checkouts"] == ["inv_a"]
    assert ops["mul"]["checkouts"] == ["inv_b"]
    assert {o for o, d in ops.items() if d["verified_by"] == "scan"} == {"broken", "ghost"}
    assert ops["dyn_op"]["verified_by"] == "collect"  # only collection saw it
    assert ops["add"]["tests"] == ["benchmark/test_add.py::test_add"]
    assert ops["add"]["files"] == ["benchmark/test_add.py"]
    assert ops["add"]["bench_class"] == "base.UnaryPointwiseBenchmark"
    assert ops["add"]["dtypes"] == "consts.FLOAT_DTYPES"
    assert ops["mm"]["bench_class"] == "base.BlasBenchmark"
    summary = two_checkouts["summary"]
    assert (summary["ops"], summary["verified_by_collect"], summary["verified_by_scan"]) == (8, 6, 2)


def test_checkout_records(two_checkouts):
    a, b = two_checkouts["checkouts"]
    assert (a["name"], b["name"]) == ("inv_a", "inv_b")
    assert a["files"] == 4 and a["tests"] == 6 and a["ops"] == 5
    assert a["collection"]["files_ok"] == 3 and a["collection"]["files_error"] == 1
    assert b["collection"]["files_ok"] == 4
    assert a["files_whose_stem_is_not_a_marker"] == ["benchmark/test_broken_import.py", "benchmark/test_dynamic.py"]
    # inside this repository's work tree: a 40-hex commit
    assert a["commit"] is None or len(a["commit"]) == 40


def test_yaml_is_stable_and_loadable(two_checkouts, tmp_path):
    out = tmp_path / "inv.yaml"
    text = dump_inventory(two_checkouts, out)
    assert out.read_text() == text
    assert text == dump_inventory(two_checkouts, None)
    data = yaml.safe_load(text)
    assert data["schema"] == inv_mod.SCHEMA
    # each disagreement on one line
    lines = text.split("disagreements:\n", 2)[-1].strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("- {") for line in lines)
    assert load_inventory(out) == sorted(two_checkouts["ops"])
    assert load_inventory(out, checkout="inv_b") == ["add", "mm", "mul", "slow_op"]
    assert "ghost" not in load_inventory(out, verified_only=True)


def test_json_output_and_loader(two_checkouts, tmp_path):
    out = tmp_path / "inv.json"
    dump_inventory(two_checkouts, out)
    assert json.loads(out.read_text())["ops"]["add"]["checkouts"] == ["inv_a", "inv_b"]
    assert load_inventory(out) == sorted(two_checkouts["ops"])


def test_loader_rejects_other_files(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("ops: [a]\n")
    with pytest.raises(UsageError, match="not an opscreen inventory"):
        load_inventory(bad)
    bad.write_text("a: [\n")
    with pytest.raises(UsageError, match="not valid"):
        load_inventory(bad)
    with pytest.raises(UsageError, match="cannot read"):
        load_inventory(tmp_path / "missing.yaml")


def test_suite_wide_collection_failure_is_one_line(tmp_path):
    data = inventory_dict(build_inventory([BADCONF], jobs=2, timeout=60, cache_dir=tmp_path))
    assert [d["kind"] for d in data["disagreements"]] == ["suite-error"]
    assert "No module named 'opscreen_fixture_device_library'" in data["disagreements"][0]["detail"]
    coll = data["checkouts"][0]["collection"]
    assert coll["files_error"] + coll["files_skipped"] == 2 and coll["files_skipped"] >= 1
    assert all(d["verified_by"] == "scan" for d in data["ops"].values())


def test_collection_timeout_kills_and_reports(tmp_path):
    inv = build_inventory([B], jobs=2, timeout=2, env={"OPSCREEN_FIXTURE_SLOW": "1"}, cache_dir=tmp_path)
    data = inventory_dict(inv)
    assert [(d["kind"], d["file"]) for d in data["disagreements"]] == [("collect-timeout", "benchmark/test_slow.py")]
    assert data["ops"]["slow_op"]["verified_by"] == "scan"
    assert data["ops"]["mul"]["verified_by"] == "collect"
    assert inv.seconds["inv_b.collect"] < 30


def test_batches_give_the_same_answer(tmp_path):
    one = inventory_dict(build_inventory([A], jobs=1, timeout=60, cache_dir=tmp_path))
    many = inventory_dict(build_inventory([A], jobs=1, timeout=60, batch=10, cache_dir=tmp_path))
    assert one["ops"] == many["ops"]
    assert one["disagreements"] == many["disagreements"]


def test_markers_fixture_scan_matches_collection(tmp_path):
    """The unusual marker forms: the scan agrees with pytest except where documented."""
    data = inventory_dict(build_inventory([MARKERS], jobs=2, timeout=60, cache_dir=tmp_path))
    assert kinds(data) == {
        ("markers", "scan-error", "benchmark/test_broken.py", None, None),
        ("markers", "collect-error", "benchmark/test_broken.py", None, None),
        ("markers", "test-not-collected", "benchmark/test_shadow.py", "test_ghost", None),
    }
    assert {o for o, d in data["ops"].items() if d["verified_by"] == "scan"} == {"ghost"}


def test_no_collect_says_scan(tmp_path):
    data = inventory_dict(build_inventory([A], collect=False, cache_dir=tmp_path))
    assert data["checkouts"][0]["collection"] == {"mode": "off"}
    assert data["disagreements"] == []
    assert {d["verified_by"] for d in data["ops"].values()} == {"scan"}
    assert "dyn_op" not in data["ops"]


def test_git_identity(tmp_path, monkeypatch):
    monkeypatch.delenv("OPSCREEN_SUITE_COMMIT", raising=False)
    plain = tmp_path / "plain"
    shutil.copytree(B, plain)
    assert suite_revision(plain) == {"commit": None, "dirty": None, "commit_source": None}
    data = inventory_dict(build_inventory([plain], collect=False, cache_dir=tmp_path / "c"))
    assert data["checkouts"][0]["commit"] is None and data["checkouts"][0]["dirty"] is None
    # an archive's commit can be declared; it is recorded as declared, not as git's word
    monkeypatch.setenv("OPSCREEN_SUITE_COMMIT", "ED2508BCB5A03000E9774734201D840BA362CD11")
    data = inventory_dict(build_inventory([plain], collect=False, cache_dir=tmp_path / "c"))
    assert data["checkouts"][0]["commit"] == "ed2508bcb5a03000e9774734201d840ba362cd11"
    assert data["checkouts"][0]["commit_source"] == "declared" and data["checkouts"][0]["dirty"] is None
    monkeypatch.setenv("OPSCREEN_SUITE_COMMIT", "not-a-sha")
    with pytest.raises(UsageError, match="OPSCREEN_SUITE_COMMIT"):
        build_inventory([plain], collect=False, cache_dir=tmp_path / "c")
    monkeypatch.delenv("OPSCREEN_SUITE_COMMIT")

    repo = tmp_path / "repo"
    shutil.copytree(B, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert suite_revision(repo) == {"commit": head, "dirty": False, "commit_source": "git"}
    (repo / "benchmark" / "test_mul.py").write_text("# changed\n")
    assert suite_revision(repo)["dirty"] is True
    # a suite folder inside another repository is not that repository's commit
    inner = repo / "vendored"
    shutil.copytree(B, inner)
    assert suite_revision(inner)["commit"] is None


def test_portable_inventory_names_no_machine_path(tmp_path):
    inv = build_inventory([A], collect=False, cache_dir=tmp_path)
    here = inventory_dict(inv)["checkouts"][0]
    assert here["path"] == str(A.resolve()) and here["python"] == sys.executable
    portable = inventory_dict(inv, portable=True)["checkouts"][0]
    assert portable["path"] == A.name and portable["python"] == Path(sys.executable).name
    assert inventory_dict(inv, portable=True)["ops"] == inventory_dict(inv)["ops"]


def test_resolve_suite_root(tmp_path):
    assert inv_mod.resolve_suite_root(A / "benchmark") == A.resolve()
    with pytest.raises(UsageError, match="does not exist"):
        inv_mod.resolve_suite_root(tmp_path / "nope")
    with pytest.raises(UsageError, match="no benchmark/"):
        inv_mod.resolve_suite_root(tmp_path)
    with pytest.raises(UsageError, match="twice"):
        build_inventory([A, A / "benchmark"], collect=False)


def test_command_writes_file_and_summary(tmp_path, capsys):
    out = tmp_path / "inv.yaml"
    rc = run_command("--suite", str(A), "--suite", str(B), "--out", str(out), "--jobs", "2", "--cache-dir", str(tmp_path / "c"))
    assert rc == 0
    err = capsys.readouterr().err
    assert "inv_a @" in err and "ops: 8 (verified by collect: 6, by scan only: 2); disagreements: 3" in err
    assert load_inventory(out) == ["add", "add_", "broken", "dyn_op", "ghost", "mm", "mul", "slow_op"]


def test_command_stdout_and_usage_errors(tmp_path, capsys):
    assert run_command("--suite", str(A), "--no-collect", "--cache-dir", str(tmp_path)) == 0
    assert yaml.safe_load(capsys.readouterr().out)["ops"]["add"]["verified_by"] == "scan"
    assert run_command("--suite", str(tmp_path / "missing")) == 2
    assert run_command("--suite", str(A), "--env", "NOEQUALS") == 2
    assert run_command("--suite", str(A), "--jobs", "0") == 2


def test_default_suite_is_the_sample_suite():
    root = inv_mod.default_suite_root()
    assert root.name == "sample_suite"


def test_plugin_runs_in_a_bare_interpreter():
    """The collection plugin imports only the stdlib (and pytest when loaded by it)."""
    path = Path(inv_mod.__file__).with_name("collect_plugin.py")
    code = f"import runpy, sys; runpy.run_path({str(path)!r}); assert 'torch' not in sys.modules and 'opscreen' not in sys.modules"
    r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_stand_in_module_lets_collection_through(tmp_path):
    """--stub: the conftest's device library is replaced; the inventory says so."""
    inv = build_inventory([BADCONF], jobs=2, timeout=60, cache_dir=tmp_path, stubs=["opscreen_fixture_device_library"])
    data = inventory_dict(inv)
    assert data["disagreements"] == []
    assert {d["verified_by"] for d in data["ops"].values()} == {"collect"}
    assert "with stand-ins for opscreen_fixture_device_library" in data["checkouts"][0]["collection"]["mode"]
    assert "stand-ins for opscreen_fixture_device_library" in data["summary"]["note"]
    assert run_command("--suite", str(BADCONF), "--stub", "not-a-name") == 2
