"""What `cpverify verdict` (and `cpverify parse`) take as input, whatever it is.

* `--out` never holds an input: the bundle written there could replace the logs it is made from.
* The bundle's copy of a log is capped (a gzip bomb, a runaway line): a copy cut short says so in
  itself, in env.json and in a row of the verdict, and the verdict still reads every line.
* Memory stays flat in a line's length (measured in benchmarks/bundle_memory.md; here, tracemalloc).
* A file name that is not UTF-8, or holds control characters, is read and shown escaped.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpverify import forked, given_logs
from cpverify.errors import EXIT_BLOCKED, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ArtifactWriteError, InputError
from cpverify.given_logs import BUNDLED_LINE_MAX_BYTES, BUNDLED_LOG_MAX_BYTES, bundle_log, bundle_logs, check_out_apart
from cpverify.inputs import shown_name
from cpverify.parse import parse_stream
from cpverify.parse.parser import MAX_LINE_BYTES
from cpverify.redact import Redactor
from helpers.slime_log import synthetic_arm

ROOT = Path(__file__).resolve().parents[1]
CUT_MARK = re.compile(rb" \[cpverify: line cut here, (\d+) more bytes not copied\]$")
NOTE = re.compile(rb"^\[cpverify: this copy stops here, after line (\d+) of (\d+): it holds (\d+) of the (\d+) bytes "
                  rb"of text in the log \((\d+) bytes as given, sha256 ([0-9a-f]{64})\); the verdict read every line\]$")


def _cli(*args, cwd, env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cpverify", *args], cwd=cwd, env=env, capture_output=True,
                          timeout=300)


def _pair(folder: Path) -> tuple[Path, Path]:
    """One log per arm whose verdict is PASS: CP=2 at 0.6x, a ratio one round per arm can decide (its
    interval is the recorded prior's, x/÷ about 1.57), so EXIT_OK says the inputs were read whole."""
    return (synthetic_arm(cp=1, actor_train_time=1.0, seed=1).write(folder / "cp1.log"),
            synthetic_arm(cp=2, actor_train_time=0.6, seed=2).write(folder / "cp2.log"))


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- --out never holds an input -----------------------------------------------------------------

@st.composite
def layouts(draw):
    """A directory chain d0/d1/.../dn, the input in one of them, --out one of them or a side branch,
    each spelled one of several ways (relative, absolute, through a symlink, with ./ and ../)."""
    depth = draw(st.integers(1, 4))
    at = draw(st.integers(0, depth))  # the input lies in d<at>
    out = draw(st.one_of(st.integers(0, depth), st.just("side")))
    return depth, at, out, draw(st.sampled_from(["absolute", "relative", "symlink", "dotted", "trailing"])), \
        draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_out_is_refused_exactly_when_it_holds_an_input_however_it_is_spelled(layout):
    depth, at, out, spelling, input_through_link = layout
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        chain = [root / "d0"]
        for i in range(1, depth + 1):
            chain.append(chain[-1] / f"d{i}")
        chain[-1].mkdir(parents=True)
        (root / "side").mkdir()
        log = chain[at] / "cp2.log"
        log.write_text("x\n")
        given_log = log
        if input_through_link:  # the input named through a link that lives elsewhere
            given_log = root / "side" / "link.log"
            given_log.symlink_to(log)
        target = root / "side" if out == "side" else chain[out]
        spelled = {"absolute": str(target), "relative": os.path.relpath(target),
                   "dotted": f"{target}/./../{target.name}", "trailing": f"{target}/"}.get(spelling)
        if spelling == "symlink":
            (root / "alias").symlink_to(target)
            spelled = str(root / "alias")
        holds = out != "side" and out <= at
        if holds:
            with pytest.raises(InputError) as raised:
                check_out_apart(spelled, {"--candidate": given_log})
            assert raised.value.exit_code == EXIT_USAGE and "--out" in raised.value.fix
        else:
            check_out_apart(spelled, {"--candidate": given_log})


def test_an_input_linked_into_out_is_refused(tmp_path):
    """The name given lies elsewhere, the bytes live inside --out: writing there could replace them."""
    base, cand = _pair(tmp_path / "out" / "logs")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.log").symlink_to(cand)
    with pytest.raises(InputError):
        check_out_apart(tmp_path / "out", {"--baseline": tmp_path / "elsewhere" / "b.log"})


def test_replaying_a_bundle_into_itself_is_refused_and_the_bundle_kept(tmp_path):
    base, cand = _pair(tmp_path)
    bundle = tmp_path / "bundle"
    assert _cli("verdict", "--baseline", str(base), "--candidate", str(cand), "--out", str(bundle),
                cwd=tmp_path).returncode == EXIT_OK
    before = _files(bundle)
    proc = _cli("verdict", "--baseline", "logs/cp1.log", "--candidate", "logs/cp2.log", "--out", ".", cwd=bundle)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert b"--out" in proc.stderr and b"fix:" in proc.stderr
    assert _files(bundle) == before


@pytest.mark.parametrize("out", [".", "./", "{abs}", "../{name}", "sub/.."])
def test_out_as_the_inputs_own_directory_is_refused_and_nothing_written(tmp_path, out):
    folder = tmp_path / "logs-here"
    base, cand = _pair(folder)
    (folder / "sub").mkdir()
    before = _files(folder)
    proc = _cli("verdict", "--baseline", "cp1.log", "--candidate", str(cand),
                "--out", out.format(abs=folder, name=folder.name), cwd=folder)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert _files(folder) == before and sorted(p.name for p in folder.iterdir()) == ["cp1.log", "cp2.log", "sub"]


def test_out_inside_the_inputs_directory_is_allowed(tmp_path):
    base, cand = _pair(tmp_path)
    proc = _cli("verdict", "--baseline", "cp1.log", "--candidate", "cp2.log", "--out", "bundle", cwd=tmp_path)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert (tmp_path / "bundle" / "verdict.json").is_file()


def test_out_that_is_a_file_is_bad_input(tmp_path):
    base, cand = _pair(tmp_path / "in")
    (tmp_path / "taken").write_text("mine\n")
    proc = _cli("verdict", "--baseline", str(base), "--candidate", str(cand), "--out", "taken", cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE and (tmp_path / "taken").read_text() == "mine\n"


# -- the bundle's copy: capped, and saying so ----------------------------------------------------

class Unredacted(Redactor):
    """A scrub that changes nothing: the copy's lines can then be compared with the log's."""

    def line_of(self, rules, line):
        return line


def _bundle(tmp: Path, data: bytes, **caps):
    source = tmp / "given.log"
    source.write_bytes(data)
    (tmp / "logs").mkdir(exist_ok=True)
    record, parsed = bundle_log(source, tmp / "logs" / "cp2.log", Unredacted(), **caps)  # type: ignore[arg-type]
    return record, parsed, (tmp / "logs" / "cp2.log").read_bytes()


LINES = st.lists(st.one_of(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60),
                           st.integers(0, 300).map(lambda n: "x" * n), st.integers(1, 300).map(lambda n: "word " * n)),
                 max_size=40)


@settings(max_examples=120, deadline=None)
@given(lines=LINES, newline_at_end=st.booleans(), max_bytes=st.integers(0, 3000), line_bytes=st.integers(8, 200),
       block=st.integers(1, 400))
def test_the_copy_holds_a_prefix_of_the_log_line_for_line_within_its_caps(lines, newline_at_end, max_bytes,
                                                                            line_bytes, block):
    data = "\n".join(lines).encode() + (b"\n" if newline_at_end and lines else b"")
    # Blocks of any size: one within the line cap is taken whole, one past it line by line.
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(given_logs, "_BLOCK", block):
        record, parsed, copy = _bundle(Path(tmp), data, max_bytes=max_bytes, line_bytes=line_bytes)
    source = data.split(b"\n")
    if source[-1] == b"":
        source.pop()
    assert parsed.lines == len(source)  # the verdict read every line, whatever the copy holds
    assert record["sha256"] == hashlib.sha256(data).hexdigest() and record["bytes"] == len(data)
    assert record["bundled_sha256"] == hashlib.sha256(copy).hexdigest()
    kept = copy.split(b"\n")
    if kept[-1] == b"":
        kept.pop()
    summary = record.get("copy", {"complete": True, "lines_cut": 0})
    if not summary["complete"]:
        note = NOTE.match(kept.pop())
        assert note is not None
        assert [int(n) for n in note.groups()[:4]] == [summary["lines"], summary["of_lines"], summary["bytes"],
                                                       summary["of_bytes"]]
        assert (int(note[5]), note[6].decode()) == (len(data), record["sha256"])
        assert summary["bytes"] <= max_bytes and len(kept) == summary["lines"]
        assert summary["of_lines"] == len(source)
    else:
        assert len(kept) == len(source)
    assert len(b"\n".join(kept)) <= max(max_bytes, 0) + 1 or summary["complete"]
    cut = 0
    for mine, theirs in zip(kept, source, strict=False):
        mark = CUT_MARK.search(mine)
        if mark is None:
            assert mine == theirs and len(theirs) <= line_bytes
            continue
        cut += 1
        head = mine[: mark.start()]
        assert len(theirs) > line_bytes and len(head) <= line_bytes
        assert theirs.startswith(head) and int(mark[1]) == len(theirs) - len(head)
        assert head == b"" or head[-1:].isspace() or len(theirs) - len(head) > 4096  # no word is cut in two
    assert cut == summary["lines_cut"] or not summary["complete"]


def test_the_line_cap_keeps_more_of_a_line_than_the_parser_reads():
    """A replay of the bundle judges the lines the verdict judged."""
    assert BUNDLED_LINE_MAX_BYTES >= MAX_LINE_BYTES


def test_a_line_cut_inside_a_credential_keeps_none_of_it(tmp_path):
    token = "hf_" + "A1b2C3d4" * 5
    line = ("x " * 100 + token + "y" * 500).encode()
    record, _, copy = _bundle(tmp_path, line + b"\n", line_bytes=200 + 20)
    assert b"hf_" not in copy and record["copy"]["lines_cut"] == 1


def test_invalid_utf8_and_carriage_returns_keep_their_lines(tmp_path):
    data = b"ok\n\xff\xfe broken\r progress 1\r progress 2\nlast"
    record, parsed, copy = _bundle(tmp_path, data)
    assert copy.split(b"\n")[0] == b"ok" and copy.count(b"\n") == 2 and parsed.lines == 3
    assert "\ufffd".encode() in copy and b"\r progress 2" in copy


def test_a_gzip_bomb_makes_a_capped_copy_and_a_row_saying_so(tmp_path):
    """A small gzip inflating past the copy's cap: the bundle holds the cap, the copy's last line,
    env.json and a warning row name the log's size and sha256; the verdict still read all of it."""
    base, cand = _pair(tmp_path)
    bomb = tmp_path / "cp2.log.gz"
    junk = b" " * (BUNDLED_LINE_MAX_BYTES - 16) + b"\n"  # blank: the fastest text to redact
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(cand.read_bytes())
        for _ in range(BUNDLED_LOG_MAX_BYTES // len(junk) + 4):
            out.write(junk)
    assert bomb.stat().st_size < BUNDLED_LOG_MAX_BYTES // 100
    out = tmp_path / "bundle"
    proc = _cli("verdict", "--baseline", str(base), "--candidate", str(bomb), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == EXIT_OK, proc.stderr
    copy = (out / "logs" / "cp2.log").read_bytes()
    assert len(copy) <= BUNDLED_LOG_MAX_BYTES + 1024
    note = NOTE.match(copy.rstrip(b"\n").rsplit(b"\n", 1)[1])
    env = json.loads((out / "env.json").read_text())["inputs"]["candidate"]
    assert note is not None and note[6].decode() == env["sha256"] == hashlib.sha256(bomb.read_bytes()).hexdigest()
    assert env["copy"]["complete"] is False and env["stored"]["compression"] == "gzip"
    assert env["copy"]["of_lines"] > env["copy"]["lines"]
    data = json.loads((out / "verdict.json").read_text())
    assert [(c["name"], c["status"], c["arm"]) for c in data["checks"] if c["name"] == "bundled_log"] == [
        ("bundled_log", "warn", "cp2")]
    assert data["arms"][1]["log_lines"] == env["copy"]["of_lines"]
    assert "this replay judges the copy" in (out / "commands.sh").read_text()


def test_a_gzip_that_breaks_off_is_judged_as_far_as_it_goes_and_inconclusive(tmp_path):
    base, cand = _pair(tmp_path)
    whole = gzip.compress(cand.read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    out = tmp_path / "bundle"
    proc = _cli("verdict", "--baseline", str(base), "--candidate", str(cut), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stderr
    data = json.loads((out / "verdict.json").read_text())
    assert [(c["name"], c["effect"], c["arm"]) for c in data["checks"] if c["name"] == "log_cut"] == [
        ("log_cut", "INCONCLUSIVE", "cp2")]
    assert json.loads((out / "env.json").read_text())["inputs"]["candidate"]["stored"]["cut"]  # the cut recorded


def test_a_file_that_only_looks_gzip_is_bad_input(tmp_path):
    base, _ = _pair(tmp_path)
    (tmp_path / "fake.log").write_bytes(b"\x1f\x8b" + b"not gzip" * 20)
    proc = _cli("verdict", "--baseline", str(base), "--candidate", "fake.log", "--out", "o", cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE and b"gzip -t" in proc.stderr


def test_a_log_that_is_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "fifo.log")
    code = ("import sys; from pathlib import Path; from cpverify.given_logs import bundle_log; "
            "from cpverify.errors import InputError; from cpverify.redact import Redactor\n"
            "try:\n    bundle_log(Path(sys.argv[1]), Path(sys.argv[2]), Redactor())\n"
            "except InputError as exc:\n    print(type(exc).__name__, exc.problem)")
    (tmp_path / "logs").mkdir()
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "fifo.log"), str(tmp_path / "logs" / "x.log")],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert proc.stdout.startswith("InputError ") and "fifo.log" in proc.stdout, proc.stderr


def test_memory_stays_flat_in_a_lines_length(tmp_path):
    """One line of 48 MiB in the log: the bundle step holds a block and a capped line, not the line."""
    cand = synthetic_arm(cp=2, actor_train_time=1.05, seed=2).text().encode()
    source = tmp_path / "long.log"
    with source.open("wb") as out:
        out.write(cand)
        out.write(b"y" * (48 << 20) + b"\n")
        out.write(cand)
    (tmp_path / "logs").mkdir()
    tracemalloc.start()
    try:
        record, parsed = bundle_log(source, tmp_path / "logs" / "cp2.log", Redactor())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    assert record["copy"]["lines_cut"] == 1 and record["copy"]["complete"]
    assert parsed.lines == 2 * cand.count(b"\n") + 1
    assert [s.step for s in parsed.steps] == [s.step for s in parse_stream(io.BytesIO(cand)).steps] * 2


# -- file names that are not UTF-8, or not printable ----------------------------------------------

@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\0" not in b))
def test_a_shown_name_is_printable_text_and_keeps_printable_names_as_they_are(raw):
    shown = shown_name(raw)
    assert shown.isprintable() and shown.encode("utf-8")  # strict: no surrogate survives
    assert shown_name(os.fsdecode(raw)) == shown
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return
    if text.isprintable():
        assert shown == text


def test_a_log_whose_name_is_not_utf8_is_read_and_its_name_escaped(tmp_path):
    base, cand = _pair(tmp_path)
    odd = b"\xff\xfe-cp1.log"  # relative to tmp_path, where the commands run
    os.rename(base, os.fsencode(tmp_path) + b"/" + odd)
    strict = {"PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}
    proc = _cli("verdict", "--baseline", odd, "--candidate", str(cand), "--out", "o", cwd=tmp_path, env=strict)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert json.loads((tmp_path / "o" / "env.json").read_text())["inputs"]["baseline"]["file"] == "\\xff\\xfe-cp1.log"
    parsed = _cli("parse", odd, cwd=tmp_path, env=strict)
    assert parsed.returncode == EXIT_OK and parsed.stdout.startswith(rb"\xff\xfe-cp1.log: ")
    missing = _cli("parse", odd + b".gone", cwd=tmp_path, env=strict)
    assert missing.returncode == EXIT_USAGE and rb"\xff\xfe-cp1.log.gone" in missing.stderr


def test_a_name_with_control_characters_reaches_no_terminal_raw(tmp_path):
    base, _ = _pair(tmp_path)
    name = "cp1\x1b]52;c;ZWNobyBwd25lZA==\x07\r.log"
    os.rename(base, tmp_path / name)
    proc = _cli("parse", name, cwd=tmp_path)
    assert proc.returncode == EXIT_OK and b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert proc.stdout.startswith(rb"cp1\x1b]52;c;ZWNobyBwd25lZA==\x07\r.log: ")


def test_a_path_that_is_not_utf8_is_printed_back_as_its_bytes(tmp_path):
    """Any command on a terminal that takes only UTF-8: the path's bytes come back, no traceback."""
    proc = _cli("plan", "--runner", "local", "--slime-dir", b"/tmp/\xff-slime", "--sh", cwd=tmp_path,
                env={"PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == EXIT_OK, proc.stderr[-2000:]
    assert b"cd '/tmp/\xff-slime'" in proc.stdout


def test_a_path_that_is_not_utf8_is_written_to_json_and_read_back(tmp_path):
    from cpverify.artifacts import atomic_write_json

    path = os.fsdecode(b"/data/\xff\xfe/slime")
    atomic_write_json(tmp_path / "plan.json", {"slime_dir": path})
    assert os.fsencode(json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))["slime_dir"]) == \
        b"/data/\xff\xfe/slime"


# -- a reader that goes away ---------------------------------------------------------------------

OOM = Path(__file__).parent / "data" / "real-logs" / "slime-train-only-h200x2" / "oom64k"


@pytest.mark.parametrize("json_out", [False, True])
def test_a_closed_pipe_on_stdout_keeps_the_verdicts_exit_code(tmp_path, json_out):
    """`cpverify verdict ... | head`: the reader is gone before the first byte, and the command still
    writes its bundle and exits with the status's code (a FAIL is never the 0 of a closed pipe)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "cpverify", "verdict", "--baseline", str(OOM / "slime-cp1.log"),
                               "--candidate", str(OOM / "slime-cp2.log"), "--out", str(tmp_path / "out"),
                               *(["--json"] if json_out else [])],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    written = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert written["status"] == "FAIL"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_line_across_blocks_that_is_not_utf8_is_copied_as_utf8(tmp_path):
    """A line read in two blocks, its bytes that are not UTF-8 in the first: the copy is UTF-8 text."""
    data = b"ok\n" + b"\xff" + b"x" * ((1 << 20) - 8) + b" tail\nlast\n"  # the line ends in the second block
    record, parsed, copy = _bundle(tmp_path, data)
    copy.decode("utf-8")  # raises where a byte is not UTF-8
    assert copy.startswith(b"ok\n\xef\xbf\xbdx") and copy.endswith(b" tail\nlast\n") and parsed.lines == 3


# -- the logs parsed side by side ----------------------------------------------------------------

SIDE_BY_SIDE = ["12_nccl-issue1267-debug-info-net-socket.log", "02_slime-issue1136-cp-step11-train-metrics.log",
                "30_ray-issue46795-ray-prefixed-nccl-p2p-ipc-read.log", "42_megatron-llm-issue11-iteration-lines-gzip.log.gz",
                "14_nccl-issue1189-h20-net-ib-gdrdma-and-p2p-cumem.log", "43_slime-issue1136-step11-as-windows-utf16.log"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")
@pytest.mark.parametrize(("cpus", "apart_max"), [(1, None), (2, None), (8, None), (8, 1), (8, 1500)])
def test_logs_parsed_side_by_side_are_bundled_as_one_after_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     cpus: int, apart_max: int | None) -> None:
    """Whatever runs in a child: the same records, parses, copies, and hosts numbered in the order given.
    8 CPUs: every log in a child, but one whose text is past APART_MAX_BYTES (all of them at 1 byte, some
    at 1,500), which is parsed here, from what was kept and the rest of it."""
    real = Path(__file__).parent / "data" / "real-logs"
    logs = [real / name for name in SIDE_BY_SIDE]
    monkeypatch.setattr(forked, "usable_cpus", lambda: cpus)
    if apart_max is not None:
        monkeypatch.setattr(given_logs, "APART_MAX_BYTES", apart_max)
    started = []
    monkeypatch.setattr(forked.Children, "start", lambda self, call, start=forked.Children.start, **kw:
                        started.append(call) or start(self, call, **kw))
    (tmp_path / "apart").mkdir()
    (tmp_path / "inline").mkdir()
    together, begun = Redactor(), []
    apart = bundle_logs([(log, tmp_path / "apart" / f"{k}.log") for k, log in enumerate(logs)], together, begun)
    alone = Redactor()
    inline = [bundle_log(log, tmp_path / "inline" / f"{k}.log", alone) for k, log in enumerate(logs)]
    assert begun == [tmp_path / "apart" / f"{k}.log" for k in range(len(logs))]
    assert [record for record, _ in apart] == [record for record, _ in inline]
    assert [parsed for _, parsed in apart] == [parsed for _, parsed in inline]
    assert [(tmp_path / "apart" / f"{k}.log").read_bytes() for k in range(len(logs))] == \
        [(tmp_path / "inline" / f"{k}.log").read_bytes() for k in range(len(logs))]
    assert together.pseudonyms.known_hosts() == alone.pseudonyms.known_hosts()
    assert together.pseudonyms.known_hosts()[0]  # the logs name hosts: the order they are learned in is tested
    for k in range(len(logs)):
        assert together.vouched(tmp_path / "apart" / f"{k}.log") == alone.vouched(tmp_path / "inline" / f"{k}.log")
        assert together.vouched(tmp_path / "apart" / f"{k}.log") is not None
    if cpus == 8:  # every log went to a child (one whose text does not fit is parsed here)
        assert len(started) == len(logs)


@pytest.mark.skipif(not sys.platform.startswith("linux") or forked.usable_cpus() < 2,
                    reason="children are forked on Linux only, with a CPU to spare")
def test_ctrl_c_while_a_child_runs_leaves_no_process_and_no_partial_file(tmp_path: Path) -> None:
    """SIGINT to the whole process group (a terminal's Ctrl-C) once the verdict has forked a child (the
    plots' first, then a log's parse)."""
    base = synthetic_arm(cp=1, actor_train_time=1.0, rollouts=5000, seed=1).write(tmp_path / "cp1.log")
    cand = synthetic_arm(cp=2, actor_train_time=1.05, rollouts=5000, seed=2).write(tmp_path / "cp2.log")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "cpverify", "verdict", "--baseline", str(base), "--candidate",
                             str(cand), "--out", str(out)], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    forked_child = None
    while proc.poll() is None and forked_child is None:
        with contextlib.suppress(OSError):
            forked_child = next(iter(children.read_text().split()), None)
    assert forked_child is not None, "the verdict ended before it forked a child"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    left_over = [stat.split(b") ")[1].split()[:4] for stat in (p.read_bytes() for p in Path("/proc").glob("[0-9]*/stat")
                 if p.exists()) if int(stat.split(b") ")[1].split()[3]) == proc.pid]
    assert left_over == [], err
    left = sorted(p.name for p in (out / "logs").iterdir()) if (out / "logs").exists() else []
    assert set(left) <= {"baseline.log"}  # a copy is there whole (written and renamed) or not at all
    if left:  # its lines, redacted (the synthetic actors' IPs): every one of them
        assert (out / "logs" / "baseline.log").read_bytes().count(b"\n") == base.read_bytes().count(b"\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")
def test_a_full_disk_while_a_log_is_kept_for_its_child_fails_as_the_bundle_would(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    real = Path(__file__).parent / "data" / "real-logs"
    made = tempfile.TemporaryFile

    class Full:
        """A file on a full disk: every write fails as the OS fails it."""

        def __init__(self, handle):
            self._handle = handle

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self._handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._handle.close()

    def full_text(*args, **kwargs):  # the text kept for a child, and only it (its folder is the bundle's)
        handle = made(*args, **kwargs)
        return Full(handle) if kwargs.get("dir") == tmp_path / "logs" else handle

    monkeypatch.setattr(given_logs.tempfile, "TemporaryFile", full_text)
    (tmp_path / "logs").mkdir()
    logs = [(real / name, tmp_path / "logs" / f"{k}.log") for k, name in enumerate(SIDE_BY_SIDE[:2])]
    with pytest.raises(ArtifactWriteError) as failed:
        bundle_logs(logs, Redactor(), [])
    assert failed.value.exit_code == EXIT_BLOCKED and "free disk space" in failed.value.fix


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")
def test_a_child_killed_while_it_parses_a_log_being_written_gives_its_parse_back(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The child parsing a log's text as it is written dies partway: the log is parsed here, the same."""
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    real = Path(__file__).parent / "data" / "real-logs"
    logs = [real / name for name in SIDE_BY_SIDE[:3]]
    parse_written = given_logs._parse_written

    def dies_partway(fd, written):
        given_logs.parse_stream = lambda stream: stream.read(100) and os.kill(os.getpid(), signal.SIGKILL)
        return parse_written(fd, written)

    monkeypatch.setattr(given_logs, "_parse_written", dies_partway)
    (tmp_path / "apart").mkdir()
    apart = bundle_logs([(log, tmp_path / "apart" / f"{k}.log") for k, log in enumerate(logs)], Redactor(), [])
    assert [parsed for _, parsed in apart] == [bundle_log(log, tmp_path / f"{k}.log", Redactor())[1]
                                               for k, log in enumerate(logs)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children are forked on Linux only")
def test_a_child_parsing_a_log_being_written_ends_when_the_writer_is_killed(tmp_path: Path) -> None:
    """SIGKILL to the process copying a log (no cleanup runs) while its child parses the text: the child
    sees the text given up and ends; nothing is left running."""
    real = Path(__file__).parent / "data" / "real-logs"
    script = f"""
import os, signal
from pathlib import Path
from cpverify import forked, given_logs
from cpverify.redact import Redactor
forked.usable_cpus = lambda: 4
parse_written, kept_whole = given_logs._parse_written, given_logs._kept_whole
def parse_written_here(fd, written):
    Path({str(tmp_path / "child.pid")!r}).write_text(str(os.getpid()))
    return parse_written(fd, written)
def killed_partway(copy, text, written):
    text.write(copy.read(100)); text.flush(); written.up_to(text.tell())
    while not Path({str(tmp_path / "child.pid")!r}).exists():
        pass
    os.kill(os.getpid(), signal.SIGKILL)
given_logs._parse_written, given_logs._kept_whole = parse_written_here, killed_partway
given_logs.bundle_logs([(Path({str(real / SIDE_BY_SIDE[1])!r}), Path({str(tmp_path / "0.log")!r})),
                        (Path({str(real / SIDE_BY_SIDE[2])!r}), Path({str(tmp_path / "1.log")!r}))], Redactor(), [])
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with (tmp_path / "stderr").open("wb") as err:  # not a pipe: the child would hold it open
        proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, timeout=60,
                              stdout=subprocess.DEVNULL, stderr=err)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "stderr").read_text()
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(200):  # gone, or a zombie waiting for whoever adopted it
        with contextlib.suppress(FileNotFoundError):
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.05)
                continue
        break
    else:
        os.kill(child, signal.SIGKILL)  # this test leaves nothing running either
        pytest.fail(f"the child {child} still runs after its writer was killed")


def test_what_runs_meanwhile_runs_once_every_copy_is_written(tmp_path: Path) -> None:
    real = Path(__file__).parent / "data" / "real-logs"
    copies = [tmp_path / f"{k}.log" for k in range(2)]
    seen: list[list[bool]] = []
    bundle_logs([(real / name, copy) for name, copy in zip(SIDE_BY_SIDE[:2], copies, strict=True)], Redactor(), [],
                meanwhile=lambda: seen.append([copy.exists() for copy in copies]))
    assert seen == [[True, True]]
