"""Prompt datasets: find the shipped ones, and validate a JSONL file before slime sees it.

Why validate at all: slime's reader (slime/utils/data.py) prints and *skips* a line it cannot
decode, and picks the reader by file suffix, so a broken dataset surfaces minutes later as
an empty or short rollout, far from its cause. Here every problem names its line and the fix.
The file is read one bounded line at a time: a 100 MB line is refused, never loaded.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from cpverify.errors import DatasetError

MAX_LINE_BYTES = 1 << 20  # 1 MiB: far above any real prompt, far below a memory problem
ROLES = ("system", "user", "assistant")
DEFAULT_DATASET = "cp_smoke.jsonl"

_LINE_SHAPE = '{"messages": [{"role": "user", "content": "..."}]}'


def packaged_dataset_path(name: str = DEFAULT_DATASET) -> Path:
    """Path of a dataset shipped inside the cpverify package (cpverify/data/NAME)."""
    path = Path(str(resources.files("cpverify") / "data" / name))
    if not path.is_file():
        raise DatasetError(
            f"cpverify ships no dataset named {name!r} (looked in {path.parent})",
            f"use {DEFAULT_DATASET!r} or give a path to your own .jsonl file",
        )
    return path


def default_dataset_path() -> Path:
    """The seeds' 8 prompts, as installed with cpverify."""
    return packaged_dataset_path(DEFAULT_DATASET)


def load_prompts(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> list[dict]:
    """Read and validate a slime prompt file (`--input-key messages`); return its records.

    Raises DatasetError naming the line and the fix for: a missing or unreadable file, a
    suffix slime does not read, no records, a line over `max_line_bytes`, invalid UTF-8 or
    JSON, a record without `messages`, and messages that are not [{role, content}, ...].
    Blank lines are skipped, as slime skips them.
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"prompt file {path} does not exist", "check the path, or run `cpverify fetch` to stage the default one")
    if not path.is_file():
        raise DatasetError(f"prompt file {path} is not a file", "give the path of a .jsonl file, not a directory")
    if path.suffix != ".jsonl":
        raise DatasetError(
            f"prompt file {path} does not end in .jsonl",
            "slime chooses its reader by suffix (.jsonl or .parquet): rename the file to end in .jsonl",
        )
    records = []
    try:
        with open(path, "rb") as f:
            lineno = 0
            while True:
                raw = f.readline(max_line_bytes + 1)  # bounded: never more than the cap in memory
                if not raw:
                    break
                lineno += 1
                if len(raw) > max_line_bytes:
                    raise DatasetError(
                        f"{path}:{lineno}: line is longer than {max_line_bytes} bytes ({max_line_bytes // 1024} KiB cap); "
                        "it is not read",
                        "one prompt per line; a prompt this long is almost certainly a concatenated or binary file",
                    )
                record = _parse_line(raw, path, lineno)
                if record is not None:
                    records.append(record)
    except OSError as exc:
        raise DatasetError(f"cannot read prompt file {path}: {exc}", "check the file's permissions") from exc
    if not records:
        raise DatasetError(
            f"prompt file {path} holds no prompts",
            f"write one JSON object per line, like {_LINE_SHAPE}",
        )
    return records


def _parse_line(raw: bytes, path: Path, lineno: int) -> dict | None:
    where = f"{path}:{lineno}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})", "save the file as UTF-8") from None
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{where}: invalid JSON: {exc.msg} (column {exc.colno})",
            f"each line must be one complete JSON object, like {_LINE_SHAPE}",
        ) from None
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: a JSON {type(record).__name__}, not an object", f"write an object, like {_LINE_SHAPE}")
    if "messages" not in record:
        keys = ", ".join(sorted(record)) or "none"
        raise DatasetError(
            f"{where}: no `messages` field (fields: {keys})",
            f"cpverify runs slime with --input-key messages: write {_LINE_SHAPE}",
        )
    _check_messages(record["messages"], where)
    return record


def _check_messages(messages, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"{where}: `messages` must be a non-empty list", f"write {_LINE_SHAPE}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise DatasetError(
                f"{where}: messages[{i}] is not an object with `role` and `content`",
                'write each message as {"role": "user", "content": "..."}',
            )
        if message["role"] not in ROLES:
            raise DatasetError(
                f"{where}: messages[{i}] has role {message['role']!r}",
                f"use one of {', '.join(ROLES)} (the chat template knows no other)",
            )
        if not isinstance(message["content"], str):
            raise DatasetError(
                f"{where}: messages[{i}].content is a {type(message['content']).__name__}, not text",
                "give the content as a string",
            )
