"""Logs given to `cpverify parse` and `cpverify verdict`: damaged ones (empty, binary, not UTF-8,
a 10 MB line, cut mid-line, two runs in one file) and hostile ones (lines written to be
evaluated). Whatever the file, the commands end with their documented exit code, without a
traceback, with bounded memory; nothing parsed from a log is ever evaluated.

The well-formed logs are real output of the stand-in slime (tests/fake_slime/train.py).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from faults.harness import FAKE_SLIME, ROOT


def line_count(path: Path) -> int:
    """The physical lines of a log the fake slime wrote (every line ends in a newline)."""
    return path.read_bytes().count(b"\n")


def slime_log(path: Path, cp: int) -> Path:
    # CP=2 at 0.6x CP=1: a ratio one log (one round) per arm can decide, its interval the recorded
    # prior's (x/÷ about 1.57), so the undamaged pair PASSes and each damaged variant shows its damage
    env = {**os.environ, "FAKE_SLIME_STEP_S": "0", "FAKE_SLIME_CP_FACTOR": "0.6"}
    with open(path, "wb") as out:
        subprocess.run([sys.executable, "train.py", "--num-rollout", "8", "--actor-num-gpus-per-node", "2",
                        "--context-parallel-size", str(cp)], stdout=out, env=env, cwd=FAKE_SLIME, check=True)
    return path


@pytest.fixture
def logs(tmp_path) -> dict[str, Path]:
    return {"cp1": slime_log(tmp_path / "cp1.log", 1), "cp2": slime_log(tmp_path / "cp2.log", 2)}


def cpverify(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """Run the CLI in a child and return it with the child's own peak memory (KiB, VmHWM)."""
    probe = ("import re, sys\nfrom cpverify.cli import main\ncode = main(sys.argv[1:])\n"
             "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
             "print(f'\\nPEAK_KB {hwm}', file=sys.stderr)\nsys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, env=os.environ, cwd=ROOT,
                          timeout=timeout, check=False)
    peak = int(re.search(rb"PEAK_KB (\d+)", proc.stderr).group(1)) if b"PEAK_KB" in proc.stderr else -1
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")[-3000:]
    return proc, peak


def parse_json(path: Path) -> dict:
    proc, _ = cpverify("parse", str(path), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def verdict_of(baseline: Path, candidate: Path, out: Path) -> tuple[int, dict]:
    proc, _ = cpverify("verdict", "--baseline", str(baseline), "--candidate", str(candidate), "--out", str(out))
    data = json.loads((out / "verdict.json").read_text())
    for name in ("verdict.md", "env.json", "commands.sh", "logs/cp1.log", "logs/cp2.log"):
        assert (out / name).is_file(), name
    (out / "logs" / "cp1.log").read_text(encoding="utf-8")  # the bundle's copies are valid UTF-8
    return proc.returncode, data


def test_the_well_formed_pair_passes(logs, tmp_path):
    """The control: the same logs, undamaged, PASS; each damaged variant below differs only in the damage."""
    code, data = verdict_of(logs["cp1"], logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (0, "PASS")
    assert parse_json(logs["cp1"])["lines"] == line_count(logs["cp1"])


def test_empty_log(logs, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    doc = parse_json(empty)
    assert doc["lines"] == 0 and doc["steps"] == [] and doc["errors"] == []
    code, data = verdict_of(empty, logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (3, "INCONCLUSIVE")
    assert "the arm printed no training step at all" in data["headline"]


def test_binary_log(logs, tmp_path):
    binary = tmp_path / "binary.log"
    binary.write_bytes(os.urandom(2 << 20))
    doc = parse_json(binary)
    assert doc["lines"] >= 1 and doc["steps"] == [] and doc["perf"] == []
    code, data = verdict_of(binary, logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (3, "INCONCLUSIVE")


def test_log_that_is_not_utf8(logs, tmp_path):
    """Latin-1 and stray bytes (a locale mismatch, a progress bar) around slime's lines: the lines still count."""
    latin = tmp_path / "latin1.log"
    raw = logs["cp1"].read_bytes().replace(b"NCCL INFO", b"NCCL INFO caf\xe9 \xff\xfe")
    latin.write_bytes(b"\xe9t\xe9 \x80\x81\n" + raw)
    doc = parse_json(latin)
    assert doc["lines"] == line_count(logs["cp1"]) + 1 and len(doc["steps"]) == 8
    assert doc["nccl"]["version"] == "2.28.9"
    code, data = verdict_of(latin, logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (0, "PASS")


def test_a_10_mb_line(logs, tmp_path):
    """A 10 MB line (a tqdm bar redrawn with \\r for an hour) between steps: the steps on both sides
    keep their true line numbers, and memory stays bounded."""
    lines = logs["cp1"].read_bytes().splitlines(keepends=True)
    huge = tmp_path / "huge-line.log"
    with open(huge, "wb") as f:
        f.writelines(lines[:20])
        f.writelines(b"\rRollout: 42%|####      | 42/100 " * 8 for _ in range(40_000))  # ~10 MB, no newline
        f.write(b"\n")
        f.writelines(lines[20:])
    assert huge.stat().st_size > 10_000_000
    proc, peak_kb = cpverify("parse", str(huge), "--json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["lines"] == line_count(logs["cp1"]) + 1 and len(doc["steps"]) == 8
    # every step after the long line sits exactly one line further down than in the original
    original = [s["line"] for s in parse_json(logs["cp1"])["steps"]]
    assert [s["line"] for s in doc["steps"]] == [n if n <= 20 else n + 1 for n in original]
    assert peak_kb < 80 * 1024, f"parse peaked at {peak_kb} KiB on a 10 MB line"
    code, data = verdict_of(huge, logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (0, "PASS")


def test_log_cut_mid_line(logs, tmp_path):
    """Cut inside the last perf record's actor_train_time (1.00xxx -> 1.0): the cut number must
    not be counted as a measurement."""
    raw = logs["cp1"].read_bytes()
    key = b"'perf/actor_train_time': "
    start = raw.rindex(key) + len(key)
    cut = tmp_path / "cut.log"
    cut.write_bytes(raw[: start + 3])  # e.g. "1.0"
    doc = parse_json(cut)
    assert doc["lines"] == line_count(logs["cp1"])
    last = doc["perf"][-1]
    assert last["rollout"] == 7 and last["salvaged"] and "perf/actor_train_time" not in last["metrics"]
    assert last["metrics"]["perf/log_probs_time"] > 0  # the complete pairs before the cut are kept
    code, data = verdict_of(cut, logs["cp2"], tmp_path / "out")
    cp1 = next(a for a in data["arms"] if a["name"] == "cp1")
    assert 7 not in cp1["counted_rollouts"] and (code, data["status"]) == (0, "PASS")


def test_two_runs_in_one_log(logs, tmp_path):
    both = tmp_path / "two-runs.log"
    both.write_bytes(logs["cp1"].read_bytes() * 2)
    code, data = verdict_of(both, logs["cp2"], tmp_path / "out")
    assert (code, data["status"]) == (3, "INCONCLUSIVE")
    check = next(c for c in data["checks"] if c["name"] == "error:run_restarted")
    first_step = parse_json(logs["cp1"])["steps"][0]["line"]
    assert f"at line {line_count(logs['cp1']) + first_step}" in check["detail"]  # the first step of the second run
    assert "give each arm its own log file" in check["fix"]


# -- hostile lines ---------------------------------------------------------------------------------


def hostile_lines(canary: Path) -> list[str]:
    """Lines shaped like slime's records (steps 10.., after the real 0..7), written to be evaluated;
    each would create `canary`, or never finish, if anything evaluated it."""
    head = "(MegatronTrainRayActor pid=1) [2026-01-01 00:00:00] model.py:918 - "
    return [
        head + f"step 10: {{'train/loss': __import__('os').system('touch {canary}')}}",
        head + f"perf 10: {{'perf/actor_train_time': (lambda: open('{canary}', 'w'))(), 'perf/step_time': 1.5}}",
        head + f"step 11: {{'train/loss': eval(\"open('{canary}', 'w')\")}}",
        head + "step 12: {'train/loss': 9**9**9**9}",  # evaluated, this never finishes
        head + "step 13: {'train/loss': 1" + "0" * 100_000 + "}",  # past int()'s digit limit
        head + "step 14: " + "{'a': " * 50_000 + "1" + "}" * 50_000,  # past the parser's recursion limit
        head + "step 15: {'train/loss': -6.05e-09, 'train/grad_norm': 1e999}",  # overflows to inf: a literal
        head + "step 17: {'train/loss': float('nan')}",
        head + f"step 16: !!python/object/apply:os.system ['touch {canary}']",
        head + "perf 16: {'perf/actor_train_time': 1.0, '__class__': {}.__class__.__base__.__subclasses__()}",
        f"torch.OutOfMemoryError: CUDA out of memory ``` </details> <script>open('{canary}')</script> | a | b |",
        "\x1b]0;pwned\x07\x1b[2J\x00 %s%s%n {0.__class__} ${HOME} $(touch " + str(canary) + ")",
    ]


def test_nothing_parsed_from_a_log_is_evaluated(logs, tmp_path):
    canary = tmp_path / "PWNED"
    hostile = tmp_path / "hostile.log"
    hostile.write_text(logs["cp1"].read_text() + "\n".join(hostile_lines(canary)) + "\n")
    proc, peak_kb = cpverify("parse", str(hostile), "--json", timeout=60)
    assert proc.returncode == 0 and not canary.exists()
    doc = json.loads(proc.stdout)
    by_step = {s["step"]: s for s in doc["steps"]}
    assert set(range(8)) <= set(by_step), "slime's own records before the hostile lines are all still read"
    for step in (10, 11, 12, 13, 14, 17):  # code and absurd literals: data that yields no value
        assert "train/loss" not in by_step.get(step, {"metrics": {}})["metrics"], step
    assert by_step[15]["metrics"] == {"train/loss": -6.05e-09, "train/grad_norm": None}  # a literal (inf -> null)
    for record in doc["steps"] + doc["perf"]:
        assert all(v is None or isinstance(v, (int, float)) for v in record["metrics"].values())
    assert peak_kb < 200 * 1024

    out = tmp_path / "out"
    code, data = verdict_of(hostile, logs["cp2"], out)
    assert not canary.exists()
    assert (code, data["status"]) == (1, "FAIL")  # the planted CUDA OOM line is an error, as it should be
    markdown = (out / "verdict.md").read_text()
    excerpt = next(e for e in data["errors"] if e["class"] == "cuda_oom")["text"]
    assert "<script>" in excerpt  # kept as text: in a fence longer than the ``` it carries ...
    # ... and shown as text wherever verdict.md carries it, as GitHub renders it: no element of its own
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)  # raw HTML kept, as GitHub does
    assert "<script" not in html and "&lt;script&gt;open(" in html
    assert html.count("<details") == html.count("</details>") == markdown.count("<details>")


# The one unpickling allowed: what a child forked by cpverify.forked wrote, read back from the nameless
# file this process opened for it before the fork (no other process can open it, no log can reach it).
# And the plots' child talks pickles through a pipe made before the fork, its ends held by the two
# processes alone (multiprocessing's Connection unpickles what it receives).
OWN_CHILDREN = {"cpverify/forked.py": {"pickle.load()"}, "cpverify/report/plot_process.py": {"multiprocessing"}}


def test_the_package_never_evaluates_text():
    """The static half: no eval/exec/compile, pickle, marshal, yaml.load or shell=True anywhere in
    cpverify (but a forked child's own result, OWN_CHILDREN); ast.literal_eval is the only reader of
    printed Python values."""
    banned_calls = {"eval", "exec", "compile", "__import__"}
    banned_attrs = {("pickle", "loads"), ("pickle", "load"), ("marshal", "loads"), ("yaml", "load"),
                    ("yaml", "unsafe_load"), ("os", "system"), ("os", "popen")}
    found = []
    for path in sorted((ROOT / "cpverify").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            imported = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                        else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for module in imported:  # pickles through pipes and queues
                if (module.split(".")[0] == "multiprocessing"
                        and "multiprocessing" not in OWN_CHILDREN.get(path.relative_to(ROOT).as_posix(), ())):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import {module}")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in banned_calls:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {func.id}()")
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and (func.value.id, func.attr) in banned_attrs
                  and f"{func.value.id}.{func.attr}()" not in OWN_CHILDREN.get(path.relative_to(ROOT).as_posix(), ())):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {func.value.id}.{func.attr}()")
            runs_a_process = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                              and func.value.id == "subprocess")
            for keyword in node.keywords if runs_a_process else ():
                if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} subprocess with shell=...")
    assert found == []
