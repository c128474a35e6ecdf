"""Every log under tests/data parses exactly as recorded, with every block-scan engine and JSON reader.

The recorded objects (tests/golden/parse/<path under tests/data>.json) are what
`cpverify parse LOG --json` printed for each log when the file was written; a change to the
parser's speed or layout must leave them alone. A change that MEANS to alter what the parser
reports rewrites them on purpose, and the diff of the JSON shows what changed:

    CPVERIFY_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_parse_golden.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.parse import dicts, records, scan, stream

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden" / "parse"
LOGS = sorted(p.relative_to(DATA) for p in DATA.rglob("*") if p.is_file() and ".log" in p.suffixes)
UPDATE = os.environ.get("CPVERIFY_UPDATE_GOLDEN") == "1"


def golden_path(log: Path) -> Path:
    return GOLDEN / f"{log}.json"


def as_printed(parsed: records.ParsedLog) -> dict:
    """The object as `cpverify parse --json` prints it (JSON has no tuples)."""
    return json.loads(json.dumps(parsed.to_json()))


def test_every_log_has_a_recording_and_every_recording_a_log():
    recorded = {p.relative_to(GOLDEN) for p in GOLDEN.rglob("*.json")}
    assert len(LOGS) >= 49
    assert recorded == {Path(f"{log}.json") for log in LOGS}


@pytest.mark.parametrize("reader", dicts.JSON_READERS)
@pytest.mark.parametrize("engine", scan.ENGINES)
@pytest.mark.parametrize("log", LOGS, ids=str)
def test_a_log_parses_as_recorded(monkeypatch, log, engine, reader):
    monkeypatch.setattr(scan, "ENGINE", engine)
    monkeypatch.setattr(dicts, "JSON_READER", reader)
    got = as_printed(stream.parse_file(DATA / log))
    path = golden_path(log)
    if UPDATE and engine == scan.ENGINES[0] and reader == dicts.JSON_READERS[-1]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert got == expected
    assert canonical(got) == canonical(expected)  # and 8.0 is no 8: == would not tell them apart


def canonical(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True)


def test_the_command_line_prints_the_recording():
    log = Path("real-logs/slime-train-only-h200x2/aa-24rollouts/slime-cp2.log")
    proc = subprocess.run([sys.executable, "-m", "cpverify", "parse", str(DATA / log), "--json"],
                          capture_output=True, text=True, cwd=TESTS.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(golden_path(log).read_text(encoding="utf-8"))
