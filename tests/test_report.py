"""cpverify.report and cpverify.artifacts: renderers, the bundle, atomic writes."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shlex
import stat
from pathlib import Path

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpverify import artifacts, report
from cpverify import verdict as v
from cpverify.artifacts import RunDir, atomic_write_json, atomic_write_text
from cpverify.errors import ArtifactWriteError, InputError
from cpverify.parse import ErrorRecord, ParsedLog
from cpverify.report import markdown
from helpers.nobody import as_nobody, public_dir
from helpers.slime_log import synthetic_arm

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "cpverify" / "data" / "verdict.schema.json").read_text())


def _verdict(factor=1.05, *, cp2_errors=(), cp2_step=None, deterministic=False):
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, seed=1).expected()
    cp2 = synthetic_arm(cp=2, actor_train_time=factor, seed=2, step_metrics=cp2_step).expected()
    cp2.errors.extend(cp2_errors)
    return v.decide([v.ArmEvidence("cp1", 1, cp1), v.ArmEvidence("cp2", 2, cp2)], comparisons=[("cp1", "cp2")],
                    thresholds=v.Thresholds(deterministic=deterministic))


def _table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """The body rows of the GitHub table whose header row starts with `header_start`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header_start}"))
    assert re.fullmatch(r"\|(-+\|)+", lines[start + 1].replace(":", "-")), lines[start + 1]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_markdown_headline_and_tables():
    verdict = _verdict()
    md = report.render_markdown(verdict, env={"gpu": "H200"}, commands="python3 train.py --lr 1e-6")
    headline = md.splitlines()[2]
    assert re.fullmatch(r"\*\*PASS\*\* — CP=2 actor_train \d\.\d\d× CP=1 \(95% CI \d\.\d\d–\d\.\d\d, "
                        r"threshold ≤ 1\.30\), 7 steps each", headline), headline
    timings = _table_rows(md, "metric")
    assert [row[0] for row in timings] == ["actor_train", "log_probs", "ref_log_probs", "train", "step"]
    assert all("n=7" in cell for row in timings for cell in row[1:])
    comparisons = _table_rows(md, "comparison ")
    primary = next(row for row in comparisons if row[1] == "**actor_train**")
    assert primary[2] == f"{verdict.to_json()['ratio']:.2f}×" and primary[6] == "PASS"
    arms = _table_rows(md, "arm ")
    assert [row[:3] for row in arms] == [["cp1", "1", "1"], ["cp2", "2", "2"]]
    checks = _table_rows(md, "means")
    assert {row[1] for row in checks} >= {"cp_effective", "counted_steps", "speed:cp2 vs cp1"}
    assert "### Numerics (first common step; reported only" in md


def test_markdown_details_blocks_hold_environment_commands_errors_and_rule():
    error = ErrorRecord("nccl_timeout", 812, "Watchdog caught collective operation timeout | ``` fenced")
    md = report.render_markdown(_verdict(cp2_errors=[error]), env={"nccl": "2.28.9"},
                                commands="CUDA_VISIBLE_DEVICES=0,1 python3 train.py")
    for summary in ("Evidence: cp2 failed at line 812 (nccl_timeout)", "Decision rule", "Environment",
                    "Exact commands"):
        assert f"<details><summary>{summary}</summary>" in md
    assert md.count("<details>") == md.count("</details>") == 4
    # an excerpt holding ``` gets a longer fence, so it cannot close the block early
    assert "````text\nWatchdog caught collective operation timeout | ``` fenced\n````" in md
    assert "```bash\nCUDA_VISIBLE_DEVICES=0,1 python3 train.py\n```" in md
    assert '"nccl": "2.28.9"' in md
    # the pipe in the excerpt is escaped inside the checks table and does not add a column
    row = next(r for r in _table_rows(md, "means") if r[1] == "error:nccl_timeout")
    assert len(row) == 5 and "\\|" in row[3]
    assert md.startswith("## cpverify verdict: FAIL\n\n**FAIL** — nccl_timeout in arm cp2 at line 812")


def test_markdown_checks_list_problems_first_with_fixes():
    md = report.render_markdown(_verdict(2.0))
    statuses = [row[0] for row in _table_rows(md, "means")]
    assert statuses == sorted(statuses, key=lambda s: ["❌", "⛔", "❔", "⚠️", "✅", "➖"].index(s.split()[0]))
    for row in _table_rows(md, "means"):
        if row[0].startswith(("❌", "⛔", "❔", "⚠️")):
            assert row[4], f"check {row[1]} has no fix"


def test_json_render_is_strict_json_even_with_nan_numerics():
    verdict = _verdict(cp2_step={"train/grad_norm": float("nan")})
    data = report.render_json(verdict)
    text = json.dumps(data, allow_nan=False)  # would raise on a bare NaN
    jsonschema.validate(json.loads(text), SCHEMA)
    row = next(r for r in data["numerics"] if r["metric"] == "train/grad_norm")
    assert row["candidate"] == "nan" and row["within_tolerance"] is False
    assert math.isnan(next(r for r in verdict.numerics if r["metric"] == "train/grad_norm")["candidate"])


def test_terminal_summary_lists_problems_with_fixes():
    text = report.render_summary(_verdict(2.0))
    assert text.splitlines()[0].startswith("FAIL — ")
    assert "FAIL speed:cp2 vs cp1" in text and "    fix: CP>1 is much slower" in text


def test_terminal_summary_survives_redaction_unchanged():
    """The terminal output is redacted as it is printed: the verdict's own words must hold nothing a
    redactor takes for a secret (`PASS: no errors` once printed as `PASS: <redacted:secret> errors`)."""
    from cpverify.redact import Redactor

    for verdict in (_verdict(), _verdict(2.0)):
        text = report.render_summary(verdict)
        assert Redactor()(text) == text


def test_write_report_writes_the_bundle(tmp_path):
    run_dir = RunDir.create(tmp_path / "run")
    paths = report.write_report(run_dir, _verdict(), env={"python": "3.11"}, commands_sh="#!/bin/sh\necho ok\n")
    assert set(paths) == {"verdict.md", "verdict.json", "commands.sh", "env.json", "plot.png", "steps.png",
                          "phases.png"}
    assert all(p.parent == run_dir.root for p in paths.values())
    jsonschema.validate(json.loads(paths["verdict.json"].read_text()), SCHEMA)
    assert json.loads(paths["env.json"].read_text()) == {"python": "3.11"}
    assert paths["commands.sh"].read_text() == "#!/bin/sh\necho ok\n"
    assert stat.S_IMODE(paths["commands.sh"].stat().st_mode) == 0o755
    assert stat.S_IMODE(paths["verdict.md"].stat().st_mode) == 0o644
    assert paths["verdict.md"].read_text().startswith("## cpverify verdict: PASS")
    assert paths["plot.png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(p.name for p in run_dir.root.iterdir()) == ["commands.sh", "env.json", "logs", "phases.png",
                                                              "plot.png", "steps.png", "verdict.json",
                                                              "verdict.md"]  # no temp files left


def test_plot_is_optional_and_needs_data(tmp_path):
    paths = report.write_report(tmp_path, _verdict(), env={}, commands_sh=None, plot=False)
    assert "plot.png" not in paths and not (tmp_path / "plot.png").exists()
    empty = v.decide([v.ArmEvidence("cp1", 1, ParsedLog()), v.ArmEvidence("cp2", 2, ParsedLog())],
                     comparisons=[("cp1", "cp2")])
    assert report.render_plot(empty) is None


def test_write_report_accepts_a_plain_path(tmp_path):
    paths = report.write_report(tmp_path, _verdict(), env=None, commands_sh=None)
    assert "No commands were recorded" in paths["commands.sh"].read_text()


# -- atomic writes -----------------------------------------------------------------------------

def test_failed_fsync_keeps_the_previous_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "verdict.md"
    target.write_text("previous good verdict\n")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(artifacts.os, "fsync", full_disk)
    with pytest.raises(ArtifactWriteError) as info:
        atomic_write_text(target, "new verdict that does not fit\n")
    assert str(target) in info.value.problem and "No space left" in info.value.problem
    assert "free disk space" in info.value.fix and "--out" in info.value.fix
    assert info.value.exit_code == 4
    assert target.read_text() == "previous good verdict\n"
    assert os.listdir(tmp_path) == ["verdict.md"]


def test_read_only_target_directory_is_named_with_a_fix(tmp_path, monkeypatch):
    target = tmp_path / "verdict.json"

    def read_only(src, dst):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(artifacts.os, "replace", read_only)
    with pytest.raises(ArtifactWriteError) as info:
        atomic_write_json(target, {"status": "PASS"})
    assert "verdict.json" in info.value.problem and "writable" in info.value.fix
    assert os.listdir(tmp_path) == []


def test_really_read_only_directory():
    """A real EACCES (root writes anywhere, so the write runs as `nobody`)."""
    with public_dir() as public:
        locked = public / "locked"
        locked.mkdir()
        (locked / "verdict.md").write_text("old\n")
        locked.chmod(0o555)
        proc = as_nobody("from cpverify.artifacts import atomic_write_text\nfrom cpverify.errors import ArtifactWriteError",
                         f"try:\n    atomic_write_text({str(locked / 'verdict.md')!r}, 'new')\n"
                         "except ArtifactWriteError as e:\n    print(e.problem)")
        assert proc.returncode == 0 and "verdict.md" in proc.stdout, proc.stderr
        assert (locked / "verdict.md").read_text() == "old\n" and os.listdir(locked) == ["verdict.md"]


def test_unserialisable_json_fails_before_touching_the_target(tmp_path):
    target = tmp_path / "env.json"
    target.write_text("{}\n")
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    with pytest.raises(ValueError):
        atomic_write_json(target, {"bad": float("nan")})
    assert target.read_text() == "{}\n" and os.listdir(tmp_path) == ["env.json"]


def test_exception_inside_the_writer_discards_the_partial_file(tmp_path):
    target = tmp_path / "logs" / "cp1.log"
    with pytest.raises(RuntimeError), artifacts.atomic_writer(target) as handle:
        handle.write("half a log\n")
        raise RuntimeError("source vanished")
    assert not target.exists() and os.listdir(target.parent) == []


def test_replaces_an_existing_file_whole(tmp_path):
    target = tmp_path / "verdict.md"
    atomic_write_text(target, "one\n")
    atomic_write_text(target, "two\n")
    assert target.read_text() == "two\n"


# -- run directory -----------------------------------------------------------------------------

def test_run_dir_layout(tmp_path):
    run = RunDir.create(base=tmp_path, run_id="20260821-100000-abc123")
    assert run.root == tmp_path / "20260821-100000-abc123" and run.run_id == "20260821-100000-abc123"
    assert run.logs_dir.is_dir()
    assert run.log_path("cp2") == run.root / "logs" / "cp2.log"
    assert (run.verdict_md.name, run.verdict_json.name, run.env_json.name, run.commands_sh.name) == (
        "verdict.md", "verdict.json", "env.json", "commands.sh")
    assert RunDir.create(tmp_path / "explicit").root == tmp_path / "explicit"


def test_run_ids_sort_by_time_and_do_not_collide():
    first, second = artifacts.new_run_id(0), artifacts.new_run_id(86400 * 365)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", first)
    assert first < second
    assert len({artifacts.new_run_id(0) for _ in range(50)}) == 50


# The rule as the README states it: letters, digits, '.', '_', '-', starting with a letter or digit, <= 64.
DOCUMENTED_RUN_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("./-_\n$;` "), min_size=1, max_size=80)
       | st.from_regex(DOCUMENTED_RUN_ID, fullmatch=True))
@example("a" * 64).via("the longest name")
@example("a" * 65).via("one character too long")
def test_a_run_id_is_a_name_inside_the_artifacts_root(tmp_path_factory, run_id):
    """Whatever the text: refused exactly when it breaks the documented rule; else a directory
    directly under the root whose name no shell reads differently (it goes into commands.sh,
    container names and Ray job ids)."""
    base = tmp_path_factory.getbasetemp() / "runs"
    documented = re.fullmatch(DOCUMENTED_RUN_ID, run_id, re.ASCII) is not None
    try:
        run = RunDir.create(base=base, run_id=run_id)
    except InputError as exc:
        assert not documented, f"{run_id!r} follows the README's rule but was refused"
        assert "is not a name" in exc.problem and "--run-id" in exc.fix
        return
    assert documented, f"{run_id!r} breaks the README's rule but was accepted"
    assert run.root.resolve().parent == base.resolve() and run.run_id == run_id
    assert shlex.quote(run_id) == run_id and not run_id.startswith(("-", "."))
    assert len(run_id) <= artifacts.RUN_ID_MAX


def test_no_run_id_or_an_empty_one_is_a_fresh_one(tmp_path):
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", RunDir.create(base=tmp_path, run_id="").run_id)


@pytest.mark.parametrize("bad", ["../escape", "/tmp/abs", "..", ".", ".hidden", "-rf", "a\nb", "a" * 65, "caf\udcff"])
def test_run_ids_that_are_not_names_are_refused(tmp_path, bad):
    with pytest.raises(InputError, match="is not a name"):
        RunDir.create(base=tmp_path / "runs", run_id=bad)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "escape").exists()


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden", "cp 2"])
def test_arm_names_must_be_file_names(tmp_path, bad):
    with pytest.raises(InputError):
        RunDir(tmp_path).log_path(bad)


def test_run_dir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ArtifactWriteError) as info:
        RunDir.create(blocker / "run")
    assert "file" in info.value.problem and info.value.fix


@pytest.mark.parametrize(("seconds", "text"), [(1756.2989, "1756"), (14.18, "14.2"), (1.0, "1.00"), (0.1134, "0.113")])
def test_durations_keep_comparable_precision(seconds, text):
    assert markdown._seconds(seconds) == text
