"""The prompt dataset and its validator."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest

from cpverify.errors import DatasetError
from cpverify.prompts import default_dataset_path, load_prompts, packaged_dataset_path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


def _seed_prompts() -> list[str]:
    """The heredoc of seed 000 (a copy of the original procedure, in tests/data)."""
    text = (DATA / "seed000_procedure.md").read_text(encoding="utf-8")
    block = re.search(r"cat > /root/datasets/cp_smoke.jsonl <<'DATA'\n(.*?)\nDATA\n", text, re.S).group(1)
    return block.splitlines()


def test_dataset_is_the_seeds_eight_prompts_verbatim():
    shipped = (ROOT / "datasets" / "cp_smoke.jsonl").read_text(encoding="utf-8").splitlines()
    assert shipped == _seed_prompts() and len(shipped) == 8
    records = load_prompts(ROOT / "datasets" / "cp_smoke.jsonl")
    assert [r["messages"][0]["content"] for r in records][:2] == ["证明 1+1=2 的最简单方法是什么？", "写一段 20 字以内的科幻故事"]


def test_package_copy_matches_and_is_the_default():
    assert default_dataset_path().read_bytes() == (ROOT / "datasets" / "cp_smoke.jsonl").read_bytes()
    assert default_dataset_path() == packaged_dataset_path("cp_smoke.jsonl")
    with pytest.raises(DatasetError, match="ships no dataset"):
        packaged_dataset_path("nope.jsonl")


def write(tmp_path, text: str | bytes, name="p.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


GOOD = '{"messages": [{"role": "user", "content": "hi"}]}\n'


def test_blank_lines_are_skipped_like_slime_does(tmp_path):
    assert len(load_prompts(write(tmp_path, GOOD + "\n   \n" + GOOD))) == 2


@pytest.mark.parametrize(
    "text, message, fix",
    [
        ("", "holds no prompts", "one JSON object per line"),
        ("\n\n", "holds no prompts", "one JSON object per line"),
        (GOOD + '{"messages": [}\n', ":2: invalid JSON: Expecting value (column 15)", "complete JSON object"),
        (GOOD + GOOD + '{"prompt": "x", "label": 1}\n', ":3: no `messages` field (fields: label, prompt)", "--input-key messages"),
        ('{"messages": "hi"}\n', ":1: `messages` must be a non-empty list", "messages"),
        ('{"messages": []}\n', ":1: `messages` must be a non-empty list", "messages"),
        ('{"messages": [{"role": "user"}]}\n', "messages[0] is not an object with `role` and `content`", "role"),
        ('{"messages": ["hi"]}\n', "messages[0] is not an object", "role"),
        ('{"messages": [{"role": "bot", "content": "x"}]}\n', "messages[0] has role 'bot'", "system, user, assistant"),
        ('{"messages": [{"role": "user", "content": 5}]}\n', "content is a int, not text", "string"),
        ("[1, 2]\n", ":1: a JSON list, not an object", "object"),
    ],
)
def test_bad_lines_name_the_line_and_the_fix(tmp_path, text, message, fix):
    with pytest.raises(DatasetError) as err:
        load_prompts(write(tmp_path, text))
    assert message in str(err.value.problem)
    assert fix in err.value.fix


def test_invalid_utf8(tmp_path):
    with pytest.raises(DatasetError, match=r":2: not UTF-8"):
        load_prompts(write(tmp_path, GOOD.encode() + b'{"messages": "\xff"}\n'))


def test_missing_directory_and_suffix(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_prompts(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="is not a file"):
        load_prompts(tmp_path)
    with pytest.raises(DatasetError) as err:
        load_prompts(write(tmp_path, GOOD, name="p.json"))
    assert "p.json" in err.value.problem and ".jsonl" in err.value.fix  # the file, and the suffix to give it


def test_oversized_line_is_refused_without_loading_it(tmp_path):
    """A 64 MiB single-line file is refused at line 2 while peak memory stays far below its size."""
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(GOOD.encode())
        chunk = b"x" * (1 << 20)
        f.write(b'{"messages": "')
        for _ in range(64):
            f.write(chunk)
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError) as err:
            load_prompts(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ":2: line is longer than 1048576 bytes" in err.value.problem
    assert peak < 4 * (1 << 20)  # a few MiB at most, for a 64 MiB line


def test_size_cap_is_configurable(tmp_path):
    path = write(tmp_path, GOOD + json.dumps({"messages": [{"role": "user", "content": "y" * 500}]}) + "\n")
    assert len(load_prompts(path)) == 2
    with pytest.raises(DatasetError, match=":2: line is longer than 100 bytes"):
        load_prompts(path, max_line_bytes=100)
