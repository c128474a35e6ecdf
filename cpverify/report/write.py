"""Writing the bundle: verdict.md, verdict.json, commands.sh, env.json, the plots and one archive to
attach to an issue, each atomically and redacted (the only part of the report that touches files)."""

from __future__ import annotations

import contextlib
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from cpverify.artifacts import (
    HashingReader,
    RunDir,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    atomic_writer,
    open_in_place,
)
from cpverify.redact import BlockRedactor, Redactor
from cpverify.report import plots as plotting
from cpverify.report.data import finite, render_json
from cpverify.report.markdown import failure_lines, render_markdown
from cpverify.verdict import Verdict

# What draws the plots: begun with the verdict and the scrubber, finished by calling what it returns.
Draw = Callable[[Verdict, Redactor], Callable[[], plotting.Rendered]]
ARCHIVE_LOG_BYTES = 64 << 20  # a log's copy in the archive stops here (and says so): an issue takes 25 MB
# Never in the archive: which placeholder is which host (logs/placeholders.json), the run's own
# bookkeeping (state.json, .lock), the workload's scratch (work/), temporaries.
_NOT_SHARED = ("placeholders.json",)
_LINE = re.compile(rb"[^\n]*\n|[^\n]+\Z")  # a log's lines end at "\n" only (a progress bar's \r is inside one)


def archive_name(run_dir: RunDir) -> str:
    return f"cpverify-{run_dir.run_id}.zip"


def write_report(run_dir: RunDir | str | Path, verdict: Verdict, *, env: dict | None, commands_sh: str | None,
                 redact: bool = True, extra_secrets: tuple[str, ...] = (), plot: bool = True,
                 redactor: Redactor | None = None,
                 command: str | None = None, draw: Draw | None = None) -> dict[str, Path]:
    """Write verdict.md, verdict.json, commands.sh, env.json, the cpverify.report.plots PNGs (when
    matplotlib is there) and `cpverify-<run-id>.zip` (the bundle with its logs, for attaching)
    atomically, every one redacted; returns file name -> path ("archive" for the zip).
    `redactor`: the run's (its placeholders are the terminal's and the other steps'); else one is
    made from `redact` (False: --no-redact keeps host names, paths and IPs; credentials go always)
    and `extra_secrets`. `command`: the command line that made the verdict, shown in verdict.md.
    `draw`: what draws the plots, begun before the archive's logs are written and finished after
    (cpverify.report.plot_process: a child process); by default they are drawn here, at once."""
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    scrub = redactor or Redactor(extra_secrets, identity=redact)
    commands = commands_sh or "#!/usr/bin/env bash\n# No commands were recorded for this verdict.\n"
    env = scrub.json(env or {})
    commands = scrub(commands)
    drawn = (draw or plotting.drawn_now)(verdict, scrub) if plot else plotting.drawn_now(None)
    # env and commands first: verdict.md is the file users look for, written once the rest exists.
    written = {
        "env.json": atomic_write_json(run_dir.env_json, finite(env)),
        "commands.sh": atomic_write_text(run_dir.commands_sh, commands, mode=0o755),
    }
    with archive(run_dir, scrub) as add:  # the logs go in first (most of its time), while the plots are drawn
        rendered, plot_note = drawn()
        evidence = {arm.name: lines for arm in verdict.arms if (lines := failure_lines(arm))}
        markdown = render_markdown(verdict, env=env, commands=commands, scrub=scrub,
                                   plots=[(p.title, p.file) for p, _ in rendered], plot_note=plot_note,
                                   evidence=evidence, command=command, bundle=archive_name(run_dir))
        data = scrub.json(render_json(verdict))
        for figure, image in rendered:
            written[figure.file] = atomic_write_bytes(run_dir.root / figure.file, image)
        written["verdict.json"] = atomic_write_json(run_dir.verdict_json, data)
        written["verdict.md"] = atomic_write_text(run_dir.verdict_md, markdown)
        add(written)
    written["archive"] = run_dir.root / archive_name(run_dir)
    return written


def write_archive(run_dir: RunDir, written: dict[str, Path], scrub: Redactor) -> Path:
    """`cpverify-<run-id>.zip` of the run's logs and `written` (see archive())."""
    with archive(run_dir, scrub) as add:
        add(written)
    return run_dir.root / archive_name(run_dir)


@contextlib.contextmanager
def archive(run_dir: RunDir, scrub: Redactor) -> Iterator[Callable[[dict[str, Path]], None]]:
    """`cpverify-<run-id>.zip`, begun with the run's logs and plan.json redacted like the bundle (host
    names, IPs, user names, home paths replaced; the raw logs on disk keep them, as the evidence), each
    log capped at ARCHIVE_LOG_BYTES; the block adds the bundle's files as written (redacted already)
    with the function it is given, and the archive is published whole when it ends. A log that
    `scrub` wrote redacted itself (the bundle's copy of a log given to `cpverify verdict`) is taken
    as it is if its bytes are still those it wrote: see _archive_log. One found changed throws that
    archive away (a temporary file until it is whole: never published) and the logs are written
    again, that log through the rules; so does a block whose redaction taught `scrub` a host or a
    secret (verdict.md's may: a label, the command line) after the logs were written: they are
    written again, redacted with what it knows now."""
    path = run_dir.root / archive_name(run_dir)
    changed: set[Path] = set()
    added: dict[str, Path] = {}
    begun = False
    while True:  # once more for each vouched log found changed, and once if the block taught `scrub`
        try:
            # Deflate level 3: a log compresses 2.4x faster than at the default 6, into a 20% larger
            # archive; level 1 is hardly faster, into a 30% larger one (benchmarks/verdict_throughput.md).
            with (atomic_writer(path, binary=True) as handle,
                  zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED, compresslevel=3) as zf):
                _write_logs(zf, run_dir, scrub, changed)
                known = scrub.learned()
                if not begun:
                    begun = True
                    yield added.update
                if scrub.learned() != known:
                    raise _LearnedSince
                for name, file in added.items():
                    zf.write(file, name)
            return
        except _NotAsVouched as found:  # raised before the files go in: that archive was thrown away
            changed.add(found.file)
        except _LearnedSince:
            pass


class _LearnedSince(Exception):
    """The block taught the redactor what the logs already written may name."""


class _NotAsVouched(Exception):
    def __init__(self, file: Path) -> None:
        super().__init__(str(file))
        self.file = file


def _write_logs(zf: zipfile.ZipFile, run_dir: RunDir, scrub: Redactor, changed: set[Path]) -> None:
    logs = sorted(run_dir.logs_dir.glob("*.log")) if run_dir.logs_dir.is_dir() else []
    extra = [run_dir.plan_json] if run_dir.plan_json.is_file() else []
    for file in [*extra, *logs]:
        if file.name in _NOT_SHARED:
            continue
        try:  # never through a link planted among the logs: it would put the file it points at in the archive
            src = os.fdopen(open_in_place(file, os.O_RDONLY), "rb")
        except OSError:
            continue
        claim = None if file in changed else scrub.vouched(src.fileno())
        with zf.open(str(file.relative_to(run_dir.root)), "w", force_zip64=True) as out, src:
            if not _archive_log(src, out, scrub, claim):
                raise _NotAsVouched(file)


def _archive_log(src: IO[bytes], out: IO[bytes], scrub: Redactor, claim: tuple[str, frozenset[str]] | None) -> bool:
    """`src`'s lines into `out`, redacted by `scrub`, as many whole lines as ARCHIVE_LOG_BYTES holds,
    `src` read once. Without a `claim` every line goes through the rules (cpverify.redact.lines).
    `claim`: (sha256, hosts), `scrub`'s word that it wrote this text redacted itself (Redactor.vouched:
    the bundle's copy of a log given to `cpverify verdict`) and the hosts it learned since the text
    began (an NCCL prefix late in a log names a host an early line named bare): the text goes as it
    is but for the lines that name one of those, and is hashed as it goes, to its end. False: its
    bytes were not of that sha256 (changed since it was written), and `out` holds them unredacted:
    the caller throws `out` away."""
    read = HashingReader(src)  # a text without a claim needs no digest; hashing is a tenth of deflating it
    only = claim[1] if claim else None
    blocks = BlockRedactor(scrub, only=only)

    def redact(data: bytes) -> bytes:
        return data if only == frozenset() else blocks.block(data)

    sent, rest = 0, b""
    while True:
        block = read.read(1 << 20)
        data = rest + block
        if sent + len(data) > ARCHIVE_LOG_BYTES:  # the whole lines that fit, then a line saying so
            out.write(redact(data[: data.rfind(b"\n", 0, ARCHIVE_LOG_BYTES - sent) + 1]))
            out.write(f"[cpverify: the copy stops after {ARCHIVE_LOG_BYTES >> 20} MiB; the whole log is "
                      "on the machine that ran it]\n".encode())
            break
        end = data.rfind(b"\n") + 1 if block else len(data)  # at the end, a last line without its newline too
        out.write(redact(data[:end]))
        sent, rest = sent + end, data[end:]
        if not block:
            break
    return claim is None or read.drain().sha256.hexdigest() == claim[0]
