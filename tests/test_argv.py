"""cpverify.argv: the one reading of `--flag value...` that the plan, the profiles and the model
check share; it must read an argv list the way slime's argparse parsers do."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from cpverify import argv

FLAGS = ("--num-rollout", "--lr", "--x")
WORDS = st.sampled_from(["1", "2", "0.5", "abc", "-3", ""])
TOKENS = st.one_of(st.sampled_from(FLAGS), WORDS, st.builds(lambda f, w: f"{f}={w}", st.sampled_from(FLAGS), WORDS))


def test_groups_split_the_command_from_its_flags():
    lead, found = argv.groups(["python3", "train.py", "--lr", "1e-6", "--x=a=b", "--flag", "v1", "v2", "--on"])
    assert lead == ["python3", "train.py"]
    assert found == [("--lr", ["1e-6"]), ("--x", ["a=b"]), ("--flag", ["v1", "v2"]), ("--on", [])]
    assert argv.options(["--a", "1", "--b", "--a", "2"])[1] == {"--a": ["1", "2"], "--b": []}


@given(st.lists(TOKENS, max_size=12))
def test_value_is_what_argparse_reads(words):
    """The last occurrence wins, `--flag=value` and `--flag value` alike, as in slime's parsers."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag in FLAGS:
        parser.add_argument(flag, nargs="?", const="")
    try:
        parsed, _ = parser.parse_known_args(words)
    except SystemExit:  # argparse refuses a value that looks like a negative number after a flag, say
        return
    for flag in FLAGS:
        expected = getattr(parsed, flag.lstrip("-").replace("-", "_"))
        assert argv.value(words, flag) == expected, (words, flag)
