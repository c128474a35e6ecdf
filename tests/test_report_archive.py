"""The archive to attach (cpverify.report.write): every log in it is redacted. The bundle's copy of a
given log, which the run's Redactor wrote and vouches for, goes as it is; any other text, or that
copy once changed or once the redactor has learned a host or a secret since, goes through the rules."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpverify.artifacts import RunDir
from cpverify.given_logs import bundle_log
from cpverify.redact import Pseudonyms, Redactor
from cpverify.report import write

TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
LOG = (f"step 1: {{'train/loss': 0.5}}\nHF_TOKEN={TOKEN}\nconnect to [gpu-node-17]:29500 from 10.1.2.3\n"
       "progress\r50%\rdone\nlast line without newline")


def _archived(run_dir: RunDir, scrub: Redactor, name: str = "logs/cp1.log") -> bytes:
    path = write.write_archive(run_dir, {}, scrub)
    assert sorted(p.name for p in run_dir.root.iterdir() if p.is_file()) == [path.name]  # no temporary left
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None  # every entry reads back to its CRC
        return zf.read(name)


def _given(tmp_path: Path, scrub: Redactor, text: str = LOG) -> RunDir:
    run_dir = RunDir.create(tmp_path / "run")
    (tmp_path / "given.log").write_text(text)
    bundle_log(tmp_path / "given.log", run_dir.log_path("cp1"), scrub)
    return run_dir


def test_the_bundles_copy_goes_into_the_archive_as_it_was_written(tmp_path, monkeypatch):
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub)
    copy = run_dir.log_path("cp1").read_bytes()
    assert TOKEN.encode() not in copy and b"gpu-node-17" not in copy and b"10.1.2.3" not in copy
    monkeypatch.setattr(scrub, "line_of", lambda rules, line: pytest.fail(f"redacted again: {line!r}"))
    assert _archived(run_dir, scrub) == copy


def test_the_copies_of_the_logs_given_to_cpverify_verdict_go_as_they_are(tmp_path, monkeypatch, capsys):
    """`cpverify verdict` renames each copy after it is written (logs/baseline.log becomes logs/cp1.log):
    the redactor's word follows the file, not its name."""
    from cpverify.cli import main

    archive_log, taken = write._archive_log, []

    def spied(src, out, scrub, claim):
        taken.append((claim is not None, archive_log(src, out, scrub, claim)))
        return taken[-1][1]

    monkeypatch.setattr(write, "_archive_log", spied)
    logs = Path(__file__).resolve().parent / "data" / "real-logs" / "slime-train-only-h200x2"
    main(["verdict", "--baseline", str(logs / "slime-cp1.log"), "--candidate", str(logs / "slime-cp2.log"),
          "--out", str(tmp_path / "out")])
    assert taken == [(True, True), (True, True)]  # logs/cp1.log, logs/cp2.log: each claimed, and as claimed


def test_a_copy_changed_after_it_was_written_is_redacted_again(tmp_path):
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub)
    with run_dir.log_path("cp1").open("a") as log:
        log.write("\nWANDB_API_KEY=Zx9Qw8Er7Ty6Ui5Op4As3Df2 on 10.9.8.7\n")
    archived = _archived(run_dir, scrub)
    assert b"Zx9Qw8Er7Ty6Ui5Op4As3Df2" not in archived and b"10.9.8.7" not in archived


def test_a_host_learned_after_the_copy_was_written_is_replaced_in_the_archive(tmp_path):
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub, "rank 3 on trainbox-42 is slow\n")
    assert b"trainbox-42" in run_dir.log_path("cp1").read_bytes()  # nothing said it was a host, yet
    scrub("master_addr=trainbox-42")  # env.json, say: now it is one
    assert b"trainbox-42" not in _archived(run_dir, scrub)


def test_a_host_named_bare_before_a_line_shows_it_is_a_host_is_replaced_in_the_archive(tmp_path, monkeypatch):
    """NCCL's prefix late in a log says `dgxh100-3` is a host; an early line named it bare. The copy
    was written line by line and keeps it there; the archive's copy does not."""
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub, "#   Rank  1 Pid 2152176 on  dgxh100-3 device  0 [0xd1] NVIDIA H100\nok\n"
                                      "dgxh100-3:2152176:2152176 [0] NCCL INFO Bootstrap\nok\n")
    assert b"on  dgxh100-3 device" in run_dir.log_path("cp1").read_bytes()
    monkeypatch.setattr(scrub, "line_of", _only_lines_naming(scrub.line_of, "dgxh100-3"))
    archived = _archived(run_dir, scrub)
    assert b"dgxh100-3" not in archived and archived.count(b"\nok\n") == 2


def _only_lines_naming(line_of, name):
    """line_of, failing a test that redacts a line that names no `name` (the rest is redacted already)."""
    def redact(rules, line):
        assert name in line.lower(), f"redacted again: {line!r}"
        return line_of(rules, line)
    return redact


def test_another_redactors_copy_is_redacted_by_this_one(tmp_path):
    run_dir = _given(tmp_path, Redactor(identity=False, pseudonyms=Pseudonyms()))
    assert b"10.1.2.3" in run_dir.log_path("cp1").read_bytes()  # --no-redact's copy keeps addresses
    assert b"10.1.2.3" not in _archived(run_dir, Redactor(pseudonyms=Pseudonyms()))


def test_a_copy_that_changes_as_it_is_archived_is_archived_through_the_rules(tmp_path, monkeypatch):
    """The copy is read once for the archive, hashed as it is deflated; bytes that are not the ones
    vouched for throw that archive away, and the log goes through the rules in the one written instead."""
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub)
    copy = run_dir.log_path("cp1")
    planted = f"HF_TOKEN={TOKEN} from 10.9.8.7\n".encode()
    archive_log, claims = write._archive_log, []

    def changing(src, out, scrub, claim):  # the file grows once it is opened, before it is read
        claims.append(claim)
        if claim is not None:
            with copy.open("ab") as log:
                log.write(planted)
        return archive_log(src, out, scrub, claim)

    monkeypatch.setattr(write, "_archive_log", changing)
    archived = _archived(run_dir, scrub)
    assert [claim is None for claim in claims] == [False, True]  # taken on its word, then through the rules
    assert TOKEN.encode() not in archived and b"10.9.8.7" not in archived
    line = Redactor(pseudonyms=scrub.pseudonyms).lines()
    assert archived == b"".join(line(piece.decode()).encode() for piece in re.findall(rb"[^\n]*\n", copy.read_bytes()))


def test_each_log_is_read_once_for_the_archive(tmp_path, monkeypatch):
    scrub = Redactor(pseudonyms=Pseudonyms())
    run_dir = _given(tmp_path, scrub, "ok\n" * 100_000)
    (run_dir.logs_dir / "runner.log").write_text(LOG)  # not the bundle's copy: through the rules
    read = []

    class Counted(write.HashingReader):
        def readinto(self, buffer):
            read.append(n := super().readinto(buffer))
            return n

    monkeypatch.setattr(write, "HashingReader", Counted)
    write.write_archive(run_dir, {}, scrub)
    assert sum(read) == sum(log.stat().st_size for log in run_dir.logs_dir.glob("*.log"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from(["ok", f"HF_TOKEN={TOKEN}", "gpu-node-17:12:34 [0] NCCL INFO", "10.1.2.3",
                                       "a\rb", "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQ",
                                       "-----END RSA PRIVATE KEY-----", "caf\u00e9 \udcff"]), max_size=30),
       newline_at_end=st.booleans(), cap=st.integers(1, 400))
def test_a_raw_log_is_archived_as_the_line_redactor_makes_it_up_to_its_cap(tmp_path_factory, monkeypatch, lines,
                                                                           newline_at_end, cap):
    monkeypatch.setattr(write, "ARCHIVE_LOG_BYTES", cap)
    raw = ("\n".join(lines) + ("\n" if newline_at_end and lines else "")).encode("utf-8", "surrogateescape")
    out = io.BytesIO()
    assert write._archive_log(io.BytesIO(raw), out, Redactor(pseudonyms=Pseudonyms()), None)
    line, expected, sent = Redactor(pseudonyms=Pseudonyms()).lines(), b"", 0
    for piece in re.findall(rb"[^\n]*\n|[^\n]+$", raw):
        if sent + len(piece) > cap:
            expected += b"[cpverify: the copy stops after 0 MiB; the whole log is on the machine that ran it]\n"
            break
        expected += line(piece.decode("utf-8", "replace")).encode()
        sent += len(piece)
    assert out.getvalue() == expected


def test_a_host_the_redactor_learns_while_the_archive_is_open_is_redacted_in_its_logs(tmp_path: Path) -> None:
    """The archive's logs are written first, and the bundle's files rendered meanwhile: what their
    redaction teaches (a host a label or the command line names in full) reaches the logs too."""
    scrub = Redactor()
    run_dir = _given(tmp_path, scrub, "step 1: {'train/loss': 0.5}\nrank 3 on gpu-node-99 waits\n")
    with write.archive(run_dir, scrub) as add:
        scrub("the command ran on gpu-node-99.corp.example.com")  # as verdict.md's redaction may learn it
        add({})
    with zipfile.ZipFile(run_dir.root / write.archive_name(run_dir)) as zf:
        archived = zf.read("logs/cp1.log")
    assert b"gpu-node-99" not in archived and b"rank 3 on host-" in archived
