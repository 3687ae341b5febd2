"""The settings model (opscreen.settings): each option declared once; the parsers, the
precedence with provenance, the resume clash check and the recorded settings derived."""

from __future__ import annotations

import argparse
import json
import dataclasses
import re
from pathlib import Path

import pytest

from opscreen import settings as S
from opscreen.backends import resolve
from opscreen.errors import UsageError
from opscreen.providers.flaggems import Suite

SRC = Path(__file__).resolve().parent.parent / "src" / "opscreen"


def parse(command: str, *argv: str) -> argparse.Namespace:
    from opscreen.cli import build_parser

    return build_parser().parse_args([command, *argv])


def test_parser_flags_are_the_declared_ones():
    from opscreen.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in (S.OP, S.RUN):
        p = sub.choices[command]
        flags = {f for a in p._actions for f in a.option_strings} - {"-h", "--help"}
        declared = {f for s in S.declared(command) for f in (*s.flags, *([s.negative] if s.negative else []))}
        assert flags == declared, command
        positionals = [a.dest for a in p._actions if not a.option_strings]
        assert positionals == [S.BY_NAME[s.name].argparse.get("dest", s.name) if S.BY_NAME[s.name].argparse else s.name
                               for s in S.declared(command) if not s.flags]
        # nothing given: every option is None (or its positional's empty value), so precedence can see "not given"
        args = p.parse_args([])
        assert all(S.given(args, command, s.name) in (None, False, []) for s in S.declared(command))


def test_precedence_flag_env_recorded_default_with_provenance():
    args = parse(S.RUN, "--timeout", "60", "--level", "comprehensive")
    env = {"DTYPES": "torch.half,bfloat16", "USE_FLAGTUNE": "1", "REPLAY_FROM": "/elsewhere"}
    recorded = {"timeout": 5.0, "level": "core", "grace": 2.5, "use_flagtune": "0", "dtypes": ["float32"], "repeats": None}
    r = S.resolve(S.RUN, args, env, recorded)
    assert (r["timeout"], r.sources["timeout"]) == (60.0, "flag")  # flag beats recorded
    assert (r["level"], r.sources["level"]) == ("comprehensive", "flag")
    assert (r["dtypes"], r.sources["dtypes"]) == (["float16", "bfloat16"], "env DTYPES")  # env beats recorded
    assert (r["use_flagtune"], r.sources["use_flagtune"]) == ("1", "env USE_FLAGTUNE")
    assert (r["grace"], r.sources["grace"]) == (2.5, "recorded")  # recorded beats the default
    assert (r["repeats"], r.sources["repeats"]) == (1, "default")  # a recorded None is no value
    assert (r["retries"], r.sources["retries"]) == (S.default("retries"), "default")
    assert r.provenance()["timer"] == "default"


def test_environment_is_scoped_by_command():
    env = {"REPLAY_FROM": "/earlier", "OP": "abs", "FLAGGEMS_ROOT": "/suite", "DTYPES": "float16"}
    op = S.resolve(S.OP, parse(S.OP), env)
    assert (op["replay_from"], op.sources["replay_from"]) == ("/earlier", "env REPLAY_FROM")
    assert op["op"] == "abs" and op["dtypes"] == ["float16"]
    run = S.resolve(S.RUN, parse(S.RUN), env)
    assert run["replay_from"] is None and run.sources["replay_from"] == "default"  # REPLAY_FROM is op's only
    assert "op" not in run.values
    assert run["dtypes"] == ["float16"]  # DTYPES counts for both
    assert S.BY_NAME["replay_from"].reads_env(S.OP) and not S.BY_NAME["replay_from"].reads_env(S.RUN)


@pytest.mark.parametrize(
    "command, argv, env, recorded, message",
    [
        (S.RUN, ["--timeout", "-1"], {}, {}, "--timeout -1.0: give a positive number of seconds"),
        (S.OP, ["--grace", "nan"], {}, {}, "--grace nan: give a number of seconds >= 0"),
        (S.RUN, ["--retries", "-1"], {}, {}, "--retries must be >= 0"),
        (S.RUN, ["--fatal-threshold", "-2"], {}, {}, "--fatal-threshold must be >= 0"),
        (S.OP, [], {"USE_FLAGTUNE": "yes"}, {}, "USE_FLAGTUNE must be 0 or 1, not 'yes'"),
        (S.RUN, [], {"DTYPES": "float99"}, {}, "bad dtype 'float99'"),
        (S.RUN, [], {}, {"repeats": 0}, "--repeats 0: give a whole number of processes per op, 1 to 100"),
        (S.OP, [], {}, {"timer_requested": "sundial"}, "unknown timer 'sundial'"),
    ],
)
def test_every_source_is_validated_in_one_line(command, argv, env, recorded, message):
    with pytest.raises(UsageError) as exc:
        S.resolve(command, parse(command, *argv), env, recorded)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_bad_device_index_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        parse(S.OP, "--device", "-1")
    assert exc.value.code == 2 and "give a whole number >= 0 in ASCII digits" in capsys.readouterr().err


def test_given_as_empty_is_one_line_with_the_declared_hint():
    with pytest.raises(UsageError, match="--level.*give the suite level"):
        S.check_given_values(parse(S.RUN, "--level", ""), S.RUN)
    with pytest.raises(UsageError, match="leave --dtypes out for the op's own"):
        S.check_given_values(parse(S.OP, "--dtypes", ""), S.OP)


def test_resume_clash_only_for_explicit_caliber_settings():
    recorded = {"level": "core", "timeout": 30.0, "dtypes": ["float16"], "repeats": 1, "extra_args": []}
    r = S.resolve(S.RUN, parse(S.RUN, "--level", "comprehensive", "--timeout", "99"), {"DTYPES": "bfloat16"}, recorded)
    clashes = S.caliber_clashes(r, recorded)
    assert clashes == ["dtypes: recorded ['float16'], asked ['bfloat16']", "level: recorded 'core', asked 'comprehensive'"]
    # the same values asked again, or values taken from the record: no clash
    same = S.resolve(S.RUN, parse(S.RUN, "--level", "core", "--dtypes", "torch.float16"), {}, recorded)
    assert S.caliber_clashes(same, recorded) == []
    assert "timeout" not in S.CALIBER and "level" in S.CALIBER


def test_a_run_recorded_before_a_setting_existed_resumes_with_what_it_ran_with():
    """--input-seed (default 0) is newer than some run dirs: a resumed run that does not
    record it ran unseeded, so its remaining ops run unseeded too, and asking for a seed
    explicitly is a clash; a new run, or one that recorded it, is not changed."""
    old = {"level": "core", "timeout": 30.0}
    r = S.resolve(S.RUN, parse(S.RUN), {}, old)
    assert (r["input_seed"], r.sources["input_seed"]) == ("off", "recorded")
    assert S.caliber_clashes(S.resolve(S.RUN, parse(S.RUN, "--input-seed", "0"), {}, old), old) == [
        "input_seed: recorded 'off', asked '0'"]
    assert S.resolve(S.RUN, parse(S.RUN), {}, None)["input_seed"] == "0"
    assert S.resolve(S.RUN, parse(S.RUN), {}, {**old, "input_seed": "5"})["input_seed"] == "5"
    assert S.resolve(S.RUN, parse(S.RUN), {"OPSCREEN_INPUT_SEED": "OFF"}, None)["input_seed"] == "off"


def _suite():
    return Suite.locate(None, env={})


def test_requests_are_frozen_and_validated_once():
    from opscreen.batch.config import BatchConfig
    from opscreen.op.request import OpRequest

    suite = _suite()
    target = suite.resolve("abs")
    req = OpRequest(op="abs", target=target, suite=suite, backend=resolve("cpu"), dtypes=["half"])
    assert req.planned_timer == "wallclock" and req.dtypes == ["float16"] and req.timeout == S.default("timeout")
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.timeout = 5  # type: ignore[misc]
    with pytest.raises(UsageError, match="--timeout"):
        OpRequest(op="abs", target=target, suite=suite, backend=resolve("cpu"), timeout=0)
    with pytest.raises(UsageError, match="--timer graph needs graph capture"):
        OpRequest(op="abs", target=target, suite=suite, backend=resolve("cpu"), timer="graph")
    cfg = BatchConfig(suite=suite, backend=resolve("cpu"), devices=[0], ops=["abs"], targets={"abs": target})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.retries = 9  # type: ignore[misc]
    with pytest.raises(UsageError, match="--retries must be >= 0"):
        BatchConfig(suite=suite, backend=resolve("cpu"), devices=[0], ops=["abs"], targets={"abs": target}, retries=-1)


def test_recorded_settings_are_derived_from_the_declarations():
    from opscreen.batch.config import BatchConfig
    from opscreen.op.request import OpRequest

    suite = _suite()
    target = suite.resolve("abs")
    req = OpRequest(op="abs", target=target, suite=suite, backend=resolve("cpu"), level="comprehensive")
    rec = req.settings()
    for s in S.declared(S.OP):
        if s.key_for(S.OP):
            assert s.key_for(S.OP) in rec
    assert rec["timer_requested"] == "auto" and rec["level"] == "comprehensive" and rec["extra_args"] == []
    cfg = BatchConfig(suite=suite, backend=resolve("cpu"), devices=[0], ops=["abs"], targets={"abs": target})
    rec = cfg.settings()
    assert {s.key_for(S.RUN) for s in S.declared(S.RUN) if s.key_for(S.RUN)} <= set(rec)
    assert rec["retries"] == S.default("retries") and rec["steal"] is True and rec["timer"] == "auto"
    # a recorded run resolves back to the same values
    again = S.resolve(S.RUN, parse(S.RUN), {}, rec)
    assert {n: again[n] for n in S.MEASURE} == cfg.measure_settings()


def test_one_dtype_vocabulary():
    from opscreen.batch.retry import dtypes_from_expr

    assert S.parse_dtypes("half, torch.double float16") == ["float16", "float64"]
    assert dtypes_from_expr("[torch.half, torch.bfloat16, torch.double]") == ["float16", "bfloat16", "float64"]


def test_defaults_are_declared_once():
    """A setting's default literal appears in settings.py only (docs aside)."""
    literals = [r"\b1800\b", r"\b10\.0\b", r"[^=!<>]=\s*\"core\"", r"retries: int = 2\b", r"threshold: int = 3\b",
                r"[^=!<>]=\s*\"upstream\""]
    hits = []
    for path in SRC.rglob("*.py"):
        if path.name == "settings.py" or "sample_suite" in path.parts:
            continue
        text = path.read_text()
        for rx in literals:
            if re.search(rx, text) and not (rx == r"\b10\.0\b" and path.name == "gitinfo.py"):
                hits.append(f"{path.relative_to(SRC)}: {rx}")
    assert hits == []
    assert not (SRC / "measure.py").exists()


def test_provenance_is_recorded_and_a_replay_takes_the_recorded_values(cli, tmp_path):
    """``opscreen op``: child_config.json's settings say where each value came from; a
    replay takes the recorded values (and says so), a flag still wins."""
    out = tmp_path / "first"
    res = cli("op", "--out", out, "--timeout", "120", env={"OP": "add", "DTYPES": "float32"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    rec = json.loads((out / "child_config.json").read_text())["settings"]
    assert rec["timeout"] == 120.0 and rec["dtypes"] == ["float32"]
    assert {k: rec["provenance"][k] for k in ("timeout", "dtypes", "op", "level", "grace")} == {
        "timeout": "flag", "dtypes": "env DTYPES", "op": "env OP", "level": "default", "grace": "default"}
    again = tmp_path / "again"
    res = cli("op", "--out", again, "--replay-from", out, "--grace", "3", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    rec = json.loads((again / "child_config.json").read_text())["settings"]
    assert (rec["timeout"], rec["dtypes"], rec["grace"]) == (120.0, ["float32"], 3.0)
    assert {k: rec["provenance"][k] for k in ("timeout", "dtypes", "grace", "replay_from")} == {
        "timeout": "recorded", "dtypes": "recorded", "grace": "flag", "replay_from": "flag"}


def test_the_folders_come_from_the_given_mapping_and_a_relative_xdg_value_is_ignored(monkeypatch, tmp_path):
    """cache_root, data_root, floors_dir and store_db read the mapping they are given, never
    os.environ; their Linux folders are the documented ones; a relative XDG value (which the
    XDG spec calls invalid, and which a child running in the suite's folder would read as
    another folder) falls back to the default instead of naming a folder under the cwd."""
    home = str(tmp_path / "home")
    monkeypatch.setenv("HOME", home)
    for key in ("XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(key, "/from/os/environ")  # not in the mapping: not read
    folders = (S.cache_root, S.data_root, S.floors_dir, S.store_db)
    assert [f({}) for f in folders] == [
        f"{home}/.cache/opscreen", f"{home}/.local/share/opscreen", f"{home}/.local/share/opscreen/floors",
        f"sqlite:///{home}/.local/share/opscreen/store.sqlite"]
    xdg = {"XDG_CACHE_HOME": "/x/cache", "XDG_DATA_HOME": "/x/data"}
    assert [f(xdg) for f in folders] == [
        "/x/cache/opscreen", "/x/data/opscreen", "/x/data/opscreen/floors", "sqlite:////x/data/opscreen/store.sqlite"]
    own = {**xdg, "OPSCREEN_CACHE_DIR": "/o/c", "OPSCREEN_FLOORS_DIR": "/o/f", "OPSCREEN_DB": "sqlite:////o/db"}
    assert [f(own) for f in folders] == ["/o/c", "/x/data/opscreen", "/o/f", "sqlite:////o/db"]
    relative = {"XDG_CACHE_HOME": "cache", "XDG_DATA_HOME": "./data"}
    assert [f(relative) for f in folders] == [f({}) for f in folders]
    assert S.kernel_caches(relative)["triton"]["dir"] == f"{home}/.cache/opscreen/triton"
