"""cpverify.report and cpverify.artifacts: renderers, the bundle, atomic writes."""

from __future__ import annotations

import errno
import html
import json
import math
import os
import re
import shlex
import stat
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpverify import artifacts, report
from cpverify import verdict as v
from cpverify.artifacts import RunDir, atomic_write_json, atomic_write_text
from cpverify.errors import EXIT_USAGE, ArtifactWriteError, InputError
from cpverify.fixes import FIX_SOCKETS_SEEN, FIX_TRANSPORT
from cpverify.model import ArmResult
from cpverify.parse import ErrorRecord, ParsedLog
from helpers.nobody import as_nobody, public_dir
from helpers.rounds import ROUNDS, arm_rounds
from helpers.slime_log import synthetic_arm

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "cpverify" / "data" / "verdict.schema.json").read_text())


def _verdict(factor=1.05, *, cp2_errors=(), cp2_step=None, deterministic=False, rounds=ROUNDS):
    cp1 = arm_rounds("cp1", 1, 1.0, seed=1, rounds=rounds)
    cp2 = arm_rounds("cp2", 2, factor, seed=2, step_metrics=cp2_step, rounds=rounds)
    cp2[0].parsed.errors.extend(cp2_errors)
    return v.decide([*cp1, *cp2], comparisons=[("cp1", "cp2")], thresholds=v.Thresholds(deterministic=deterministic))


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


REAL = Path(__file__).resolve().parent / "data" / "real-logs" / "slime-train-only-h200x2"


def _first_screen(md: str) -> str:
    """What a reader sees before the first folded block."""
    return md.split("<details>")[0]


def test_the_first_screen_answers_the_question():
    verdict = _verdict()
    md = report.render_markdown(verdict, env={"gpu": "H200"}, commands="python3 train.py --lr 1e-6",
                                command="cpverify run --profile smoke")
    lines = md.splitlines()
    assert lines[0] == "## cpverify verdict: PASS"
    assert re.fullmatch(r"\*\*PASS\*\* — CP=2 actor_train \d\.\d\d× CP=1 \((median|mean), 95% CI \d\.\d\d–\d\.\d\d, "
                        rf"threshold ≤ 1\.30; (median|mean) \d\.\d\d×\), {ROUNDS} rounds each \({7 * ROUNDS} steps each\)",
                        lines[2]), lines[2]
    screen = _first_screen(md)
    # logs judged as given: their order is not known to be interleaved, so the line does not say it is
    assert f"**Rounds:** {ROUNDS} rounds per arm · each round's actor_train ratio" in screen
    assert "**Setup:**" in screen and "**Command:** `cpverify run --profile smoke`" in screen
    phases = _table_rows(screen, "phase")  # ONE per-phase table, before anything folded
    assert screen.count("| phase |") == 1
    assert [row[0] for row in phases] == ["**actor_train**", "log_probs", "ref_log_probs", "train", "step"]
    primary = verdict.primary.metrics["perf/actor_train_time"]
    assert phases[0][3] == f"**{primary.ratio:.2f}× ({primary.ci[0]:.2f}–{primary.ci[1]:.2f})**"
    assert phases[0][4].startswith("✅ within 1.30")
    assert all(" ms" in row[1] or " s" in row[1] for row in phases)  # units, scaled
    # compact: no padded cells
    assert not [line for line in md.splitlines() if line.startswith("|") and "   " in line]


def test_a_ratio_whose_interval_straddles_the_threshold_is_undecided_not_pass():
    from cpverify.report import story

    verdict = _verdict()
    est = stats_estimate(1.56, (1.2, 1.9))
    for metric in ("perf/actor_train_time", "perf/log_probs_time"):
        mark, words = story.meaning(metric, est, verdict)
        assert (mark, words.split(":")[0]) == ("❔", "undecided")
    assert story.meaning("perf/log_probs_time", stats_estimate(1.56, (1.4, 1.9)), verdict)[0] == "⚠️"
    assert story.meaning("perf/actor_train_time", stats_estimate(1.56, (1.4, 1.9)), verdict)[0] == "❌"
    assert story.meaning("perf/actor_train_time", stats_estimate(1.1, (1.0, 1.2)), verdict)[0] == "✅"


def stats_estimate(ratio, ci):
    from cpverify.verdict.stats import MEDIAN, Estimate, RatioEstimate

    return RatioEstimate((Estimate(MEDIAN, ratio, ci),), 0.01, 10, 10, 0.95)


@pytest.mark.parametrize(("seconds", "text"), [(1756.2989, "1756 s"), (14.18, "14.2 s"), (1.0, "1.00 s"),
                                               (0.1134, "113 ms"), (0.002, "2.00 ms"), (0.0000213, "21 µs")])
def test_durations_keep_comparable_precision_in_a_readable_unit(seconds, text):
    from cpverify.report.story import seconds as shown

    assert shown(seconds) == text


def _oom_verdict(tmp_path):
    from cpverify.parse import parse_file

    evidence = [v.ArmEvidence(f"cp{cp}", cp, parse_file(REAL / "oom64k" / f"slime-cp{cp}.log"),
                              log_path=REAL / "oom64k" / f"slime-cp{cp}.log") for cp in (1, 2)]
    return v.decide(evidence, comparisons=[("cp1", "cp2")], thresholds=v.Thresholds(warmup=2))


def test_a_failure_names_its_root_cause_once_with_its_evidence(tmp_path):
    """Both arms OOM inside slime's vocab_parallel_softmax; Ray's driver reports it first as
    RayTaskError(OutOfMemoryError). The root cause is the OOM, said once for both arms, its
    evidence ending on the OOM line."""
    verdict = _oom_verdict(tmp_path)
    assert [a.failure["class"] for a in verdict.arms] == ["cuda_oom", "cuda_oom"]
    assert verdict.summary.startswith("cuda_oom in arm cp1 at line 1324")
    evidence = {arm.name: report.failure_lines(arm) for arm in verdict.arms}
    first, lines = evidence["cp1"]
    assert first + len(lines) - 1 == 1324 and lines[-1].startswith("torch.OutOfMemoryError")
    assert any("vocab_parallel_softmax" in line for line in lines)
    md = report.render_markdown(verdict, evidence=evidence)
    screen = _first_screen(md)
    assert screen.count("**Root cause:**") == 1
    assert "**Root cause:** `cuda_oom` in cp1 line 1324, cp2 line 1507" in screen
    assert re.search(r"^▶ +1324 \| torch\.OutOfMemoryError", screen, re.M)
    assert "**Fix:** lower --max-tokens-per-gpu" in screen
    # the wrapper is not a second story: named once, as reporting the root cause
    assert screen.count("ray_task_error") == 1 and "reporting the root cause" in screen


def test_a_reason_shared_by_every_arm_is_said_once():
    result = {name: ArmResult(name, "blocked", None, Path(f"/nonexistent/{name}.log"), 0.0,
                              reason="doctor: 1 GPU on this host, the plan needs 2", fix="run on a host with 2 GPUs")
              for name in ("cp1", "cp2")}
    verdict = v.decide([v.ArmEvidence(n, cp, ParsedLog(), result[n]) for n, cp in (("cp1", 1), ("cp2", 2))],
                       comparisons=[("cp1", "cp2")])
    md, text = report.render_markdown(verdict), report.render_summary(verdict, columns=100)
    assert md.count("1 GPU on this host") == 2  # the headline, and one item for both arms
    assert text.count("1 GPU on this host") == 2 and "runner [cp1 and cp2]" in text


def test_markdown_details_blocks_hold_environment_commands_and_rule():
    error = ErrorRecord("nccl_timeout", 812, "Watchdog caught collective operation timeout | ``` fenced")
    md = report.render_markdown(_verdict(cp2_errors=[error]), env={"nccl": "2.28.9"},
                                commands="CUDA_VISIBLE_DEVICES=0,1 python3 train.py")
    for summary in ("Decision rule", "Environment (env.json)", "Exact commands (commands.sh)", "Arms"):
        assert f"<details><summary>{summary}</summary>" in md
    assert md.count("<details>") == md.count("</details>")
    assert "```bash\nCUDA_VISIBLE_DEVICES=0,1 python3 train.py\n```" in md
    assert '"nccl": "2.28.9"' in md
    assert md.startswith("## cpverify verdict: FAIL\n\n**FAIL** — nccl_timeout in arm cp2 at line 812")
    html_ = _render(md)
    assert "<a " not in html_ and "<img" not in html_


def test_markdown_lists_problems_first_with_fixes():
    md = report.render_markdown(_verdict(2.0))
    problems = md.split("**What failed**")[1].split("<details>")[0]
    marks = [line.split()[1] for line in problems.splitlines() if line.startswith("- ")]
    assert marks == sorted(marks, key=["❌", "⛔", "❔", "⚠️"].index)
    items = [block for block in problems.split("\n- ")[1:]]
    assert items and all("- fix: " in item for item in items)


def test_json_render_is_strict_json_even_with_nan_numerics():
    verdict = _verdict(cp2_step={"train/grad_norm": float("nan")})
    data = report.render_json(verdict)
    text = json.dumps(data, allow_nan=False)  # would raise on a bare NaN
    jsonschema.validate(json.loads(text), SCHEMA)
    row = next(r for r in data["numerics"] if r["metric"] == "train/grad_norm")
    assert row["candidate"] == "nan" and row["within_tolerance"] is False
    assert math.isnan(next(r for r in verdict.numerics if r["metric"] == "train/grad_norm")["candidate"])


def test_terminal_summary_lists_problems_with_fixes():
    verdict = _verdict(2.0)
    text = report.render_summary(verdict)
    assert text.splitlines()[0].startswith("FAIL — ")
    speed = next(c for c in verdict.checks if c.name == "speed:cp2 vs cp1")
    flat = " ".join(text.split())  # the summary wraps to the terminal
    assert flat.index(f"{speed.effect} {speed.name}: ") < flat.index(f"fix: {speed.fix}")  # the row, then its fix


def test_terminal_summary_survives_redaction_unchanged():
    """The terminal output is redacted as it is printed: the verdict's own words must hold nothing a
    redactor takes for a secret (`PASS: no errors` must not become `PASS: <redacted:secret> errors`)."""
    from cpverify.redact import Redactor

    for verdict in (_verdict(), _verdict(2.0)):
        text = report.render_summary(verdict)
        assert Redactor()(text) == text


@pytest.mark.parametrize("columns", [80, 100])
def test_the_terminal_summary_fits_the_terminal_without_breaking_words(tmp_path, columns):
    path = "/very/long/" + "directory-name/" * 12 + "slime-cp2.log"  # longer than any terminal line
    error = ErrorRecord("nccl_timeout", 812, f"Watchdog caught collective operation timeout reading {path}")
    for verdict in (_verdict(), _verdict(2.0), _oom_verdict(tmp_path), _verdict(cp2_errors=[error])):
        text = report.render_summary(verdict, columns=columns)
        for line in text.splitlines():
            # a line over the width is one word that cannot be broken (the path), after its label
            assert len(line) <= columns or len(line.split()) <= 2, line
    assert path in text  # whole: not cut mid-word


def test_write_report_writes_the_bundle_and_an_archive_to_attach(tmp_path):
    run_dir = RunDir.create(tmp_path / "run")
    (run_dir.logs_dir / "cp1.log").write_text("ip 10.1.2.3 on host gpu-node-17.corp.example.com\n")
    (run_dir.logs_dir / "placeholders.json").write_text("{}")
    paths = report.write_report(run_dir, _verdict(), env={"python": "3.11"}, commands_sh="#!/bin/sh\necho ok\n")
    assert set(paths) == {"verdict.md", "verdict.json", "commands.sh", "env.json", "ratio.png", "steps.png",
                          "phases.png", "archive"}
    assert all(p.parent == run_dir.root for p in paths.values())
    jsonschema.validate(json.loads(paths["verdict.json"].read_text()), SCHEMA)
    assert json.loads(paths["env.json"].read_text()) == {"python": "3.11"}
    assert paths["commands.sh"].read_text() == "#!/bin/sh\necho ok\n"
    assert stat.S_IMODE(paths["commands.sh"].stat().st_mode) == 0o755
    assert stat.S_IMODE(paths["verdict.md"].stat().st_mode) == 0o644
    assert paths["verdict.md"].read_text().startswith("## cpverify verdict: PASS")
    assert paths["ratio.png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert paths["archive"].name == "cpverify-run.zip"
    with zipfile.ZipFile(paths["archive"]) as zf:
        names = set(zf.namelist())
        log = zf.read("logs/cp1.log").decode()
    assert names >= {"verdict.md", "verdict.json", "env.json", "commands.sh", "ratio.png", "logs/cp1.log"}
    assert "logs/placeholders.json" not in names  # which placeholder is which host stays here
    assert "10.1.2.3" not in log and "corp.example.com" not in log  # redacted like the bundle
    assert (run_dir.logs_dir / "cp1.log").read_text().startswith("ip 10.1.2.3")  # the raw log is untouched
    assert sorted(p.name for p in run_dir.root.iterdir()) == sorted(
        ["commands.sh", "env.json", "logs", "phases.png", "ratio.png", "steps.png", "verdict.json", "verdict.md",
         "cpverify-run.zip"])  # no temp files left


def test_share_lines_say_what_to_paste_and_attach(tmp_path, monkeypatch):
    paths = report.write_report(tmp_path / "run", _verdict(), env={}, commands_sh=None)
    monkeypatch.setattr("shutil.which", lambda name: None)
    text = report.share_lines(paths, columns=400)
    assert f"paste {paths['verdict.md']}" in text and str(paths["archive"]) in text and "gh issue" not in text
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/gh")
    text = report.share_lines(paths, columns=400)
    assert f"gh issue comment <issue> --repo THUDM/slime --body-file {paths['verdict.md']}" in text


def test_plot_is_optional(tmp_path):
    paths = report.write_report(tmp_path, _verdict(), env={}, commands_sh=None, plot=False)
    assert not any(name.endswith(".png") for name in paths)


def test_write_report_accepts_a_plain_path(tmp_path):
    paths = report.write_report(tmp_path, _verdict(), env=None, commands_sh=None)
    script = paths["commands.sh"].read_text()
    assert script.startswith("#!") and not [line for line in script.splitlines() if not line.startswith("#")]


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
    assert "--out" in info.value.fix  # the option that moves the artifacts elsewhere
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
        assert exc.exit_code == EXIT_USAGE and "--run-id" in exc.fix  # the option to change
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


# -- log text is inert in verdict.md -------------------------------------------------------------

def _render(markdown_text: str) -> str:
    """verdict.md as GitHub renders it: cmark-gfm with GitHub's extensions, raw HTML let through
    (GitHub keeps <details>, <img>, <a>: what the text itself opens must not be there)."""
    import cmarkgfm
    from cmarkgfm.cmark import Options

    return cmarkgfm.github_flavored_markdown_to_html(markdown_text, options=Options.CMARK_OPT_UNSAFE)


class _Html:
    """The rendered HTML's tags and text, the text outside code (where GitHub's filters act) apart."""

    def __init__(self, rendered: str) -> None:
        from html.parser import HTMLParser

        self.tags, self.text, self.live, depth = [], [], [], [0]
        outer = self

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.tags.append(tag)
                depth[0] += tag in ("code", "pre")

            def handle_endtag(self, tag):
                depth[0] -= tag in ("code", "pre")

            def handle_data(self, data):
                outer.text.append(data)
                if not depth[0]:
                    outer.live.append(data)

        Parser(convert_charrefs=True).feed(rendered)


# What GitHub turns into a mention, a reference or a link after rendering, outside code.
_ACTIVE = re.compile(r"@\w|#\d|://|\bwww\.|\bGH-\d|:[\w+-]+:", re.I)
_LOGLIKE = st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
                    | st.sampled_from(list("`@#*_[]()!<>&|\\~$:/.- \n\r\t\x1b\x08") + [
                        "http://x.io", "www.a.b", "#1062", "@alice", "<img src=x>", "</details>", "<0>", "```",
                        ":tada:", "GH-12", "&lt;", "1.", "# ", "- ", "> ", "a_b_", "**", "deadbeef12"]),
                    max_size=24).map("".join)


@settings(max_examples=400, deadline=None)
@given(_LOGLIKE)
@example("see @alice and #1062 at https://evil.example/x.png ![img](https://e.x/a.png) <b>bold</b>")
@example("a stray ` backtick and <0> inside `code <0>`")
@example("FAIL\b\b\b\bPASS \x1b]52;c;ZWNobw==\x07 \r")
@example("rank_www.host.0 and x_www.y")  # GFM links www. after an underscore
def test_log_text_in_prose_renders_inert_and_as_it_was(text):
    from cpverify.report.gfm import prose
    from cpverify.terminal import inert

    rendered = _Html(_render(prose(text)))
    assert set(rendered.tags) <= {"p", "code"}, rendered.tags
    assert not _ACTIVE.search(" ".join(rendered.live))
    # as it was: one line, controls shown as escapes; a `span` shows as code without its backticks
    shown, expected = "".join(rendered.text).strip("\n").replace("\n", " "), " ".join(inert(text).split())
    assert shown.replace("`", "") == expected.replace("`", "")
    if "`" not in text:
        assert shown == expected


@settings(max_examples=400, deadline=None)
@given(_LOGLIKE)
@example("`")
@example("`` `x` ``")
@example(" lead and trail ")
def test_log_text_in_a_code_span_renders_exactly(text):
    from cpverify.report.gfm import code, table
    from cpverify.terminal import inert

    shown = " ".join(inert(text).split("\n"))
    for markdown_text in (f"x {code(text)}", table([[code(text)]], ["h"])):
        rendered = _Html(_render(markdown_text))
        assert "a" not in rendered.tags and "img" not in rendered.tags
        codes = re.findall(r"<code>(.*?)</code>", _render(markdown_text), re.S)
        if shown:
            assert [html.unescape(c) for c in codes] == [shown], markdown_text
        assert not _ACTIVE.search(" ".join(rendered.live).replace("x ", "", 1).replace("h", ""))


@settings(max_examples=300, deadline=None)
@given(st.lists(_LOGLIKE, max_size=6))
def test_log_lines_in_a_code_block_render_exactly(lines):
    from cpverify.report.gfm import details, fenced
    from cpverify.terminal import inert

    text = "\n".join(lines)
    rendered = _render(details("Evidence", fenced(text)))
    blocks = re.findall(r"<pre[^>]*><code[^>]*>(.*?)</code></pre>", rendered, re.S)
    assert len(blocks) == 1 and rendered.count("</details>") == 1
    body = inert(text).rstrip()
    assert html.unescape(blocks[0]) == (body + "\n" if body else "")


def test_a_verdict_of_hostile_log_text_renders_no_link_mention_or_html(tmp_path):
    hostile = "@alice see #1062 https://evil.example/x <img src=x onerror=alert(1)> </details> ` ![i](http://e/i.png)"
    error = ErrorRecord("nccl_timeout", 812, hostile)
    md = report.render_markdown(_verdict(cp2_errors=[error]), env={"note": hostile}, commands=hostile,
                                command=f"cpverify verdict --baseline '{hostile}'")
    rendered = _Html(_render(md))
    assert set(rendered.tags) <= {"h2", "p", "strong", "code", "pre", "table", "thead", "tbody", "tr", "th", "td",
                                  "details", "summary", "ul", "li", "sub", "em"}, set(rendered.tags)
    assert not _ACTIVE.search(" ".join(rendered.live))
    assert rendered.tags.count("details") == _render(md).count("</details>")


# -- the size budget -----------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 40), st.integers(50, 4000))
def test_verdict_md_stays_under_githubs_limit_whatever_the_input(cps, lengths, errors, width):
    """The largest inputs a run can make: a sweep of CPs x lengths, every arm failing with many error
    classes and long lines, a long environment and long commands."""
    arms, comparisons = [], []
    for length in range(lengths):
        base = f"cp1-s{length}k"
        for cp in [1, *[2 ** i for i in range(1, cps + 1)]]:
            parsed = synthetic_arm(cp=cp, actor_train_time=1.0 + 0.1 * cp, seed=cp + length).expected()
            parsed.errors.extend(ErrorRecord(f"class_{i}", 100 + i, "x" * width + f" @user{i} #1{i}")
                                 for i in range(errors))
            arms.append(v.ArmEvidence(f"cp{cp}-s{length}k", cp, parsed))
            if cp > 1:
                comparisons.append((base, f"cp{cp}-s{length}k"))
    verdict = v.decide(arms, comparisons=comparisons or [(arms[0].name, arms[0].name)] if False else comparisons,
                       thresholds=v.Thresholds()) if comparisons else None
    if verdict is None:
        return
    md = report.render_markdown(verdict, env={"k": "v" * width * 20}, commands="echo " + "y" * width * 10,
                                command="cpverify run " + "--flag " * width)
    assert report.size(md) <= report.BUDGET < report.LIMIT
    assert md.startswith("## cpverify verdict:") and md.count("<details>") == md.count("</details>")


def test_the_recorded_sweep_fits_and_keeps_its_first_screen():
    """A sweep verdict (benchmarks/pipeline-h200x4's: 71,531 characters rendered in full) fits GitHub's
    comment limit and keeps its first screen."""
    verdict = _sweep_verdict()
    md = report.render_markdown(verdict, env={"doctor": {"x": "y" * 40_000}}, commands="z\n" * 20_000)
    assert report.size(md) <= report.BUDGET
    assert "**Sweep:**" in md and "| phase |" in md
    assert "env.json" in md  # what was cut says where it is


def _sweep_verdict():
    arms, comparisons = [], []
    for length in (1, 8, 32, 64, 128):
        for cp in (1, 2, 4, 8):
            parsed = synthetic_arm(cp=cp, actor_train_time=1.0 + 0.05 * cp * length, seed=cp * length).expected()
            arms.append(v.ArmEvidence(f"cp{cp}-s{length}k", cp, parsed))
            if cp > 1:
                comparisons.append((f"cp1-s{length}k", f"cp{cp}-s{length}k"))
    return v.decide(arms, comparisons=comparisons)


def test_fit_drops_blocks_least_needed_first_and_says_where_they_went():
    from cpverify.report.markdown import Block, fit

    blocks = [Block("first screen"), Block("e" * 500, 0, "_env: see {pointer}_"), Block("p" * 500, 2, "_passed_")]
    assert fit(blocks, "X.zip", budget=2000) == "first screen\n\n" + "e" * 500 + "\n\n" + "p" * 500
    assert fit(blocks, "X.zip", budget=700) == "first screen\n\n_env: see X.zip_\n\n" + "p" * 500
    assert fit(blocks, "X.zip", budget=100) == "first screen\n\n_env: see X.zip_\n\n_passed_"
    cut = fit([Block("a" * 80), Block("b" * 300)], budget=300)
    assert cut.startswith("a" * 80 + "\n\n_The rest is cut") and "bb" not in cut and report.size(cut) <= 300


def test_a_secondary_phase_whose_interval_straddles_the_threshold_is_not_a_pass():
    cp1 = synthetic_arm(cp=1, actor_train_time=1.0, secondary=1.0, jitter=0.3, seed=3).expected()
    cp2 = synthetic_arm(cp=2, actor_train_time=1.0, secondary=1.3, jitter=0.3, seed=4).expected()
    verdict = v.decide([v.ArmEvidence("cp1", 1, cp1), v.ArmEvidence("cp2", 2, cp2)], comparisons=[("cp1", "cp2")])
    est = verdict.primary.metrics["perf/log_probs_time"]
    assert est.ci[0] <= 1.3 < est.ci[1]  # the case at hand: the interval straddles the threshold
    check = next(c for c in verdict.checks if c.name == "speed:log_probs:cp2 vs cp1")
    assert (check.status, check.meaning) == ("skip", "not judged") and "undecided" in check.detail


# -- log text is inert on the terminal -----------------------------------------------------------

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
                | st.sampled_from(["\x1b[2K", "\x1b[1A", "\x1b]52;c;ZWNobw==\x07", "\b", "\r", "\x9b", "\u202e",
                                   "\x1b[31m", "\x1b"]), max_size=20).map("".join))
def test_inert_text_holds_no_control_character_and_keeps_printable_text(text):
    from cpverify.terminal import inert

    shown = inert(text)
    assert not _CONTROLS.search(shown)
    assert inert(shown) == shown  # idempotent: every sink may apply it
    if text.isprintable():
        assert shown == text


def test_everything_printed_is_made_inert_at_the_terminal_sink(capsys):
    from cpverify.redact import Redactor, redacted_terminal

    with redacted_terminal(Redactor()):
        print("FAIL\b\b\b\bPASS \x1b]52;c;ZWNobw==\x07 \x1b[1A\x1b[2Kgone? \rover")
        print("partial line, flushed", end="", file=sys.stderr, flush=True)
    out, err = capsys.readouterr()
    assert not _CONTROLS.search(out + err)
    assert "FAIL\\x08\\x08\\x08\\x08PASS" in out and "\\x1b]52;c;ZWNobw==\\x07" in out and "gone? \\x0dover" in out


@pytest.mark.parametrize("columns", ["80", "100"])
def test_cpverify_verdict_on_hostile_logs_prints_inert_lines_that_fit(tmp_path, capsys, monkeypatch, columns):
    from cpverify.cli import main

    hostile = "\x1b]52;c;cHduZWQ=\x07FAIL\b\b\b\bPASS\r\x1b[2K"
    logs = {}
    for cp in (1, 2):
        text = (REAL / "kit-check-12rollouts" / f"slime-cp{cp}.log").read_text()
        logs[cp] = tmp_path / f"cp{cp}.log"
        logs[cp].write_text(text + f"Traceback (most recent call last):\nRuntimeError: NCCL error {hostile}\n")
    monkeypatch.setenv("COLUMNS", columns)
    main(["verdict", "--baseline", str(logs[1]), "--candidate", str(logs[2]), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert not _CONTROLS.search(out + err)
    for line in (out + err).splitlines():
        assert len(line) <= int(columns) or len(line.split()) <= 2, line
    last = " ".join(err.split("artifacts:")[-1].split())  # the last lines: what to paste and attach
    assert f"share: paste {tmp_path / 'out' / 'verdict.md'} as the issue comment" in last


@pytest.mark.parametrize("columns", [80, 100, 120, 166])
def test_the_lint_findings_fit_the_terminal_without_cutting_a_word(columns):
    from cpverify.lint import format_findings, lint_argv

    findings = lint_argv(["python3", "train.py", "--context_parallel_size", "2", "--rollout-num", "8",
                          "--tensor-model-parallel-size", "3", "--wandb-key", "x" * 60], gpus=2)
    assert findings
    text = format_findings(findings, columns)
    assert max(map(len, text.splitlines())) <= columns, text
    assert "--context-parallel-size" in text and "--context_parallel_size" in text  # flags whole


def test_when_both_arms_show_sockets_the_advice_names_them_once_and_says_what_to_change():
    arms = [v.ArmEvidence(f"cp{cp}", cp, synthetic_arm(cp=cp, actor_train_time=t, seed=cp,
                                                       transport="NET/Socket/0").expected())
            for cp, t in ((1, 1.0), (2, 2.2))]
    verdict = v.decide(arms, comparisons=[("cp1", "cp2")])
    speed = next(c for c in verdict.checks if c.name == "speed:cp2 vs cp1")
    rows = [c for c in verdict.checks if c.name == "nccl_transport"]
    assert speed.effect == "FAIL" and len(rows) == 2 and all(c.status == "warn" for c in rows)
    assert all(c.fix == FIX_SOCKETS_SEEN for c in rows) and FIX_SOCKETS_SEEN in speed.fix
    assert FIX_TRANSPORT not in speed.fix  # what the logs already show is not sent to be looked for
    md = report.render_markdown(verdict)
    assert md.count("`nccl_transport` (cp1 and cp2)") == 1  # one item for both arms
    assert "over TCP sockets in cp1 and cp2" in md  # the reading says what the sockets mean for the ratio
