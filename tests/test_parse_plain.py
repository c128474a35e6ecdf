"""Lines read from their bytes (cpverify.parse.plain, stream._feed_dense), slime's own and Megatron-LM's
iteration line, read as the line path reads them: the same ParsedLog, each piece of a line printed
otherwise, among lines that change how the next ones are read, with any cut into blocks."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_logs import STORED_PLAIN, feed_all

from cpverify.parse import LogParser, dicts, parse_stream, plain, scan, stream
from cpverify.parse import parser as parsing

# Each piece of a line: (as slime prints it, something else in its place).
_PREFIX = (["(MegatronTrainRayActor pid=32167) ", "(RolloutManager pid=7, ip=10.0.0.1) ",
            "\x1b[36m(MegatronTrainRayActor pid=3)\x1b[0m ", "", "(" + "A" * 90 + " pid=1) "],
           ["(exitcode pid=3) ", "[36m(A pid=2)[0m ", " ", "(A pid=1 +2s) ", "\x1b[36m(A pid=1) ", "(A pid=1)"])
_STAMP = (["[2026-08-21 10:00:00] ", "[2026-08-21 10:00:00,123] "], ["[] ", "", "[now] ", "[2026-08-21 10:00:00]"])
_FILE = (["model.py:918 - ", "timer.py:32 - ", "memory_utils.py:41 - "], ["timer.py:x - ", "", "a-b.py:1 - "])
# Names and times that differ only in their digits share a line's shape (plain.TIMER_SHAPES).
_TIMER = (["Timer actor_train start", "Timer update_weights end", "Timer train_wait end (elapsed: 1.9s)",
           "Timer layer1 start", "Timer layer2 end (elapsed: 7.5s)", "Timer layer9 end (elapsed: 2.4s)"],
          ["Timer exitcode_7 start", "Timer cpverify-layout end", "Timer x.y start", "Timer a end (elapsed: nan s)",
           "Timer layer3 end (elapsed: 1.2.3s)", "Timer 4 start"])
_KIND = (["step", "perf", "rollout", "critic-step", "eval"], ["steps", "Step", "perf/x", "step x"])
_INDEX = (["3", "0", "7"], ["1" * 30, "²", "-1"])
_DICT = (["{'train/loss': 1.5, 'train/step': 3}", "{'perf/actor_train_time': 2.0, 'perf/step_time': 3.25}",
          "{'rollout/response_len/mean': 312.5, 'perf/tokens_per_gpu_per_sec': 245}", "{}",
          "{'perf/train_time': 3.9648529999999997, 'train/lr-pg_0': 1e-06}"],
         ["{'a': 1e400}", "{'a': " + "9" * 400 + "}", "{'a': nan, 'b': -inf}", "{'a': True}", "{'a': true}",
          "{'a': null, 'b': 1}", "{'a': 'NCCL INFO x'}", "{'a': 'Traceback (most recent call last):'}",
          "{'exitcode': 1}", "{'x': 'Signal 9 (SIGKILL) received by PID 3'}", "{'a': [1, 2], 'b': {'c': 1}}",
          "{'a': 1, 'b': 2", "{'a': 1.5, 'b': -2}", "{'t': 'é'}", "{'a': 1,}", "{'a': np.float64(1.5)}",
          "{'a': 'x', 'b': 2.5}", "{'a': 1} {'b': 2}", "{'a' 1}", "{'step 3': {'x': 1}}",
          "{'a': 1.0, 'loss': 0.25, 'pad': '" + "x" * 70 + "'"])
_LABEL = (["after wake_up model", "before offload", ""],
          ["after step 3", "after torch distributed error", "Root Cause", "x NCCL INFO y", "a:b", "after {x}"])
_MEMORY_DICT = (["{'gpu': '0', 'total_GB': 139.81, 'free_GB': 101.2}", "{'total_GB': 79.11}"],
                ["{'gpu': '0', 'x': {1: 2}}", "{'a': 1", "{'a': 'step 3: {'}", "{'x': 'CUDA out of memory', 'y': 1}"])
_RANK = (["[Rank 0] ", "[Rank 12] ", ""], ["[Rank x] ", "[rank 0] ", "[Rank 0]"])
_SUFFIX = ([""], [" ", "\r", " [repeated 3x across cluster]", "\r\n", "\r(A pid=1) x", "\x1b[0m"])

_CONTEXT = st.sampled_from([
    "Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    x()", "ValueError: boom",
    "Root Cause (first observed failure):", "  exitcode  : 1 (pid: 7)", "", "plain text",
    "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/nccl/ProcessGroupNCCL.cpp:3",
    "RuntimeError: The size of tensor a (120) must match the size of tensor b (119) a", "t non-singleton dimension 2",
    "(MegatronTrainRayActor pid=1) e54db9740f9d:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    "(MegatronTrainRayActor pid=1) e54db9740f9d:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "(MegatronTrainRayActor pid=1) [2026-08-21 10:00:00] model.py:918 - step 9: {'train/loss': 1.5, 'train/x'",
    "{'train/grad_norm': 0.5}", "'perf/actor_train_time': 2.5,", "cpverify-layout rank=0 world=2 tp=1 pp=1 cp=2 dp=1",
])


def _piece(draw, pieces: tuple[list[str], list[str]], odd: bool) -> str:
    return draw(st.sampled_from(pieces[1] if odd else pieces[0]))


@st.composite
def _slime_line(draw, odd_draws: int = 2) -> str:
    """A line in slime's shape, with up to `odd_draws` of its pieces printed otherwise."""
    kind = draw(st.sampled_from(["timer", "record", "memory"]))
    message = {"timer": [_TIMER], "record": [_KIND, _INDEX, _DICT], "memory": [_RANK, _LABEL, _MEMORY_DICT]}[kind]
    pieces = [_PREFIX, _STAMP, _FILE, *message, _SUFFIX]
    # Each of two draws names a piece to print otherwise about half the time: most lines keep one
    odd = {i for i in (draw(st.integers(0, 2 * len(pieces) - 1)) for _ in range(odd_draws)) if i < len(pieces)}
    text = [_piece(draw, piece, i in odd) for i, piece in enumerate(pieces)]
    if kind == "record":  # `step 3: {...}`
        head, kind_word, index, body, tail = text[:3], text[3], text[4], text[5], text[6]
        return "".join(head) + f"{kind_word} {index}: {body}" + tail
    if kind == "memory":  # `[Rank 0] Memory-Usage LABEL: {...}`
        head, rank, label, body, tail = text[:3], text[3], text[4], text[5], text[6]
        return "".join(head) + f"{rank}Memory-Usage {label}: {body}" + tail
    return "".join(text)


_SLIME_STEP = "(MegatronTrainRayActor pid=1) [2026-08-21 10:00:00] model.py:918 - step 5: {'train/loss': 1.5}"
_TEN_STEPS = [_SLIME_STEP] * 10  # a block of them: the next is read whole (stream._feed_dense)
_WRAPPED = "(MegatronTrainRayActor pid=1) [2026-08-21 10:00:00] model.py:918 - step 9: {'train/loss': 1.5, 'train/x'"
_TIMERS_ONE_SHAPE = [f"(MegatronTrainRayActor pid=1) [2026-08-21 10:00:0{n}] timer.py:32 - Timer layer{n} {what}"
                     for n, what in enumerate(["start", "end (elapsed: 7.5s)", "end (elapsed: 2.4s)", "start",
                                               "end (elapsed: 1.2.3s)", "end (elapsed: 8.5s)", "end (elapsed: 4.4.4s)"])]
_LONG_TIMER = "(" + "A" * 90 + " pid=1) [2026-08-21 10:00:00] timer.py:24 - Timer actor_train start"


@settings(max_examples=800, deadline=None)
# Mostly lines in slime's shape, as a slime log is: a block of them is read whole (stream._feed_dense).
@given(st.lists(st.one_of(*[_slime_line(0)] * 3, _slime_line(), _slime_line(), _CONTEXT), max_size=40), st.integers(1, 4096),
       st.sampled_from(scan.ENGINES), st.sampled_from(dicts.JSON_READERS), st.sampled_from([64 * 1024, 100]))
@example(["Traceback (most recent call last):", _SLIME_STEP, '  File "x.py", line 1, in <module>', "ValueError: x"],
         64, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_SLIME_STEP, "Traceback (most recent call last):", _SLIME_STEP, '  File "x.py", line 1, in <module>',
          "ValueError: x"], 64, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)  # a dense block's traceback
@example([_SLIME_STEP.replace("{'train/loss': 1.5}", "{'a': 'Traceback (most recent call last):'}"), "ValueError: x"],
         4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)  # a dict no flat one: the long way
@example([_SLIME_STEP.replace("step 5: {'train/loss': 1.5}", "[Rank 0] Memory-Usage after torch distributed error: "
                              "{'x': 'CUDA out of memory', 'y': 1}")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)
@example([*_TEN_STEPS, _WRAPPED, _SLIME_STEP, "plain text"], len("\n".join(_TEN_STEPS)) + 1, scan.ENGINES[0],
         dicts.JSON_READERS[0], 64 * 1024)  # a record held open in a block read whole
@example([*_TEN_STEPS, _LONG_TIMER], len("\n".join(_TEN_STEPS)) + 1, scan.ENGINES[0], dicts.JSON_READERS[0], 100)
@example([_SLIME_STEP, _SLIME_STEP.replace("step 5", "step 2")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)
@example([*_TEN_STEPS, *_TIMERS_ONE_SHAPE], len("\n".join(_TEN_STEPS)) + 1, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)  # Timer lines of one shape in a block read whole: each read from its own bytes
def test_slime_lines_read_from_bytes_as_the_line_path_reads_them(lines, block, engine, reader, cap):
    _read_both_ways(lines, block, engine, reader, cap)


def _read_both_ways(lines: list[str], block: int, engine: str, reader: str, cap: int) -> None:
    """The lines, cut into blocks of `block` bytes, read as the line path reads every line of them."""
    data = ("\n".join(lines) + "\n").encode()
    with_patch = [(stream, "READ_BLOCK_BYTES", block), (scan, "ENGINE", engine), (dicts, "JSON_READER", reader),
                  (parsing, "MAX_LINE_BYTES", cap),  # what of a line is read: its head, past it
                  (plain, "read", lambda *_: False), (plain, "iteration", lambda *_: False)]  # the last: the long way
    saved = [(module, name, getattr(module, name)) for module, name, _ in with_patch]
    try:
        for module, name, value in with_patch:
            setattr(module, name, value)
        the_long_way = feed_all(data).to_json()
        for undone in saved[-2:]:
            setattr(*undone)
        if b"NCCL INFO" not in data:  # which a line's bytes give to NCCL's reading, its text to every kind
            assert feed_all(data, as_text=True).to_json() == the_long_way
        assert feed_all(data).to_json() == the_long_way
        assert parse_stream(io.BytesIO(data)).to_json() == {**the_long_way, "source": STORED_PLAIN}
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


# Megatron-LM's training_log line (megatron/training/training.py, NVIDIA/Megatron-LM 1dcf0daf): each
# field as it prints one (name, format, printed on every line), in its order.
_MEGATRON_FIELDS = [
    ("consumed samples", "{:12d}", True), ("consumed bins", "{:12d}", False), ("skipped samples", "{:12d}", False),
    ("elapsed time per iteration (ms)", "{:.1f}", True), ("throughput per GPU (TFLOP/s/GPU)", "{:.1f}", False),
    ("energy per GPU (J/iter/GPU)", "{:.1f}", False), ("power per GPU (W/GPU)", "{:.1f}", False),
    ("learning rate", "{:.6E}", True), ("global batch size", "{:5d}", True), ("lm loss", "{:.6E}", False),
    ("mtp_1 loss", "{:.6E}", False), ("load_balancing_loss", "{:.6E}", False), ("loss scale", "{:.1f}", True),
    ("grad norm", "{:.3f}", False), ("num zeros", "{}", False), ("params norm", "{:.3f}", False),
    ("number of skipped iterations", "{:3d}", True), ("number of nan iterations", "{:3d}", True),
]
_MEGATRON_STAMP = ([" [2026-08-21 10:00:00.123456]", " [2026-08-21 10:00:00]", ""],
                   ["[2026-08-21 10:00:00.123456]", " [now]", " [2026-08-21 10:00:00]  ", "\t", "\x1b[0m", " [1;2m]",
                    " [iteration 9/ 9 |]", "[\x1b[1m]"])
_MEGATRON_HEAD = ([" iteration {0:8d}/{1:8d} |"],
                  [" iteration {0} / {1} |", " iteration {0}/{1}|", " Iteration {0:8d}/{1:8d} |", " iteration ²{0}/{1} |",
                   " iteration {0}{0}{0}{0}{0}/{1} |", " iteration {0}" + "9" * 5000 + "/{1} |",
                   " iteration {0:8d}/{1:8d} | x |", " iteration {0:8d}/{1:8d}", " iteration {0:8d}/{1:8d} || "])
# A field's name, value or separator printed otherwise: each, where the line path reads the line
# otherwise, or skips the field, or reads more than the field.
_ODD_NAME = ["Timer actor_train start", "cpverify-check name=x status=fail", "x NCCL INFO y", "a\x1b[0m",
             "Traceback (most recent call last)", "Signal 9 (SIGKILL) received by PID 3", "Root Cause", "exitcode",
             'File "x.py", line 1, in f', "elapsed time per iteration (s)", "elapsed time per iteration", "",
             "  padded  ", "é loss", "lm loss", "a=b", "x [repeated 3x across cluster]", "step 3", "{", "Timer x"]
_ODD_VALUE = ["x", "", "1_0", "٣", "{1}", "0x1f", "- 1", "1e400", "-0", "+5", ".5", "5.", "infinity", "\t5", "\x0b5",
              "NaN", "1 2", "9" * 400, "1\r2", "\x1c5", "5\x00"]
_ODD_SEPARATOR = [" {0} {1} |", " {0}:{1}|", " {0}: {1} ||", " {0}: {1}", " {0}: {1}: 2 |", " {0} | {1} |",
                  " {0}: {1} | x: 2: 3 | y |", " {0}: {1} |\r", " {0}: {1} | ]"]
_NUMBER = st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 1e300, -1e-300, 5e-324, 1.0]))


def _value(draw, fmt: str) -> str:
    if fmt.endswith("d}"):
        return fmt.format(draw(st.one_of(st.integers(0, 10**7), st.integers())))
    if fmt == "{}":  # num zeros: a float or an int, as reduced
        return str(draw(st.one_of(_NUMBER, st.integers(0, 10**6))))
    return fmt.format(draw(_NUMBER))


@st.composite
def _megatron_line(draw, odd_draws: int = 2) -> str:
    """An iteration line as Megatron-LM prints one, with up to `odd_draws` of its pieces printed otherwise."""
    pieces = ["prefix", "stamp", "head", "name", "value", "separator", "order", "suffix"]
    odd = {pieces[i] for i in (draw(st.integers(0, 2 * len(pieces) - 1)) for _ in range(odd_draws)) if i < len(pieces)}
    fields = [[name, _value(draw, fmt), " {0}: {1} |"] for name, fmt, always in _MEGATRON_FIELDS
              if always or draw(st.booleans())]
    at = draw(st.integers(0, len(fields) - 1))
    for piece, column, choices in (("name", 0, _ODD_NAME), ("value", 1, _ODD_VALUE), ("separator", 2, _ODD_SEPARATOR)):
        if piece in odd:
            fields[at][column] = draw(st.sampled_from(choices))
    if "order" in odd:  # reordered, or a field twice
        fields = draw(st.one_of(st.permutations(fields), st.just([*fields, fields[at]])))
    head = _piece(draw, _MEGATRON_HEAD, "head" in odd).format(draw(st.integers(0, 10**6)), draw(st.integers(0, 10**7)))
    return (_piece(draw, _PREFIX, "prefix" in odd) + _piece(draw, _MEGATRON_STAMP, "stamp" in odd) + head
            + "".join(separator.format(name, value) for name, value, separator in fields)
            + _piece(draw, _SUFFIX, "suffix" in odd))


_ITERATION = (" [2026-08-21 10:00:00.123456] iteration        3/     100 | consumed samples:         3072 | elapsed "
              "time per iteration (ms): 849.8 | learning rate: 3.395564E-06 | global batch size:  1024 | lm loss: "
              "2.274822E+00 | loss scale: 1.0 | grad norm: 0.318 | number of skipped iterations:   0 | number of nan "
              "iterations:   0 |")


def _with_field(name: str, value: str = "1.5") -> str:
    return _ITERATION.replace(" loss scale:", f" {name}: {value} | loss scale:")


@settings(max_examples=800, deadline=None)
# Iteration lines among tracebacks, elastic tables, NCCL's, cpverify's and slime's lines.
@given(st.lists(st.one_of(_megatron_line(0), _megatron_line(), _megatron_line(), _slime_line(), _CONTEXT),
                max_size=30), st.integers(1, 4096), st.sampled_from(scan.ENGINES), st.sampled_from(dicts.JSON_READERS),
       st.sampled_from([64 * 1024, 100]))
# Each guard of plain.iteration: a line it sends the long way, which reads it otherwise than a fast path would.
@example([_ITERATION.replace("lm loss:", "lm loss | 3: x:")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)  # a field without its colon, the next with two
@example([_ITERATION + " cpverify-check name=x status=fail"], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("Timer actor_train start"), "Timer actor_train end (elapsed: 2.0s)"], 4096, scan.ENGINES[0],
         dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("cpverify-check name=x status=fail")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("x NCCL INFO NCCL version 2.21.5+cuda12.4")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)
@example([_with_field("a\x1b[0m")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("Traceback (most recent call last)"), '  File "x.py", line 1, in <module>', "ValueError: x"],
         4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("Signal 9 (SIGKILL) received by PID 3")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("lm loss", "x")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)  # a field skipped
@example([_with_field("é loss")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_with_field("lm loss", "\r5")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)
@example([_ITERATION.replace("2026-08-21 10:00:00.123456", "iteration 9/ 9 |")], 4096, scan.ENGINES[0],
         dicts.JSON_READERS[0], 64 * 1024)  # a stamp the long way reads as the head
@example([_ITERATION.replace(" 3/", " " + "9" * 5000 + "/")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)  # no int
@example([_with_field("elapsed time per iteration (s)", "9.5")], 4096, scan.ENGINES[0], dicts.JSON_READERS[0],
         64 * 1024)
@example(["Traceback (most recent call last):", _ITERATION, '  File "x.py", line 1, in <module>', "ValueError: x"],
         64, scan.ENGINES[0], dicts.JSON_READERS[0], 64 * 1024)  # inside a traceback
@example([*_TEN_STEPS, _ITERATION, _WRAPPED, _ITERATION], len("\n".join(_TEN_STEPS)) + 1, scan.ENGINES[0],
         dicts.JSON_READERS[0], 64 * 1024)  # in a block read whole, and a record held open
@example([_ITERATION], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], len(_ITERATION) - 40)  # its head only
@example([_ITERATION], 4096, scan.ENGINES[0], dicts.JSON_READERS[0], 90)  # a head without a gate word
def test_megatron_iteration_lines_read_from_bytes_as_the_line_path_reads_them(lines, block, engine, reader, cap):
    _read_both_ways(lines, block, engine, reader, cap)


def test_megatron_iteration_lines_are_read_in_their_shape():
    """The lines the fast path takes are the ones Megatron-LM prints (a recorded log's, this commit's
    format): a change that stopped taking them would leave every one to the long way."""
    recorded = Path(__file__).parent / "data" / "real-logs" / "25_megatron-llm-issue11-iteration-lines.log"
    lines = [*recorded.read_bytes().splitlines(), _ITERATION.encode()]
    parser = LogParser()
    assert all(plain.iteration(parser, line, number) for number, line in enumerate(lines, 1))
    assert [it.iteration for it in parser.result().iterations] == [122, 123, 124, 125, 3]


def test_the_megatron_field_sets_kept_stay_bounded():
    """A log whose every line names other fields (or one of 5,000 bytes) keeps a bounded cache."""
    parser = LogParser()
    lines = [_with_field(f"loss {n}") for n in range(plain._MAX_PLANS + 50)] + [_with_field("x" * 5000)]
    assert all(plain.iteration(parser, line.encode(), number) for number, line in enumerate(lines, 1))
    assert len(plain._PLANS) <= plain._MAX_PLANS
    assert max(len(b"|".join(names)) for names in plain._PLANS) <= plain._MAX_PLANNED_BYTES


def test_a_slime_log_is_read_in_its_shape():
    """The shapes the fast path takes are the ones slime prints (tests/helpers/slime_log.py's lines):
    a change of PLAIN that stops matching them would leave every slime line to the long way."""
    from helpers.slime_log import synthetic_arm

    lines = synthetic_arm(cp=1, actor_train_time=1.0, rollouts=3, seed=1).lines
    shaped = [line for line in lines if plain.PLAIN.fullmatch(line.encode())]
    kinds = {line.split(" - ", 1)[1].split(" ", 1)[0] for line in shaped}
    assert {"Timer", "step", "perf", "rollout", "[Rank"} <= kinds
    assert len(shaped) >= 0.8 * sum(" - " in line for line in lines)


_VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str),
                   st.integers(-(10**400), 10**400).map(str), st.sampled_from(
                       ["'0'", "'nan'", "'-inf'", "'x true'", "True", "None", "true", "null", "false", "nan", "[1, 2]",
                        "{'a': 1}", "1e400", "-0.0", "1_0", "0x1f", "'a' 'b'", ""]))
_KEY = st.sampled_from(["'train/loss'", "'perf/step_time'", "'true'", "'a'", "a", "'x y'", "1", "'k'"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_KEY, _VALUE), max_size=6), st.sampled_from([", ", ",", " , "]),
       st.sampled_from(dicts.JSON_READERS))
@example([("'true'", "1.5"), ("'x y'", "2.5")], ", ", dicts.JSON_READERS[0])  # a JSON word in a key, numbers only
@example([("'true'", "1.5"), ("'a'", "null")], ", ", dicts.JSON_READERS[0])
@example([("'a'", "1"), ("'b'", "false")], ", ", dicts.JSON_READERS[0])
def test_a_plain_dict_reads_as_parse_dict_reads_its_text(pairs, comma, reader):
    body = ("{" + comma.join(f"{key}: {value}" for key, value in pairs) + "}").encode()
    saved, dicts.JSON_READER = dicts.JSON_READER, reader
    try:
        assert repr(dicts.parse_plain_dict(body)) == repr(dicts.parse_dict(body.decode()))  # NaN: by its repr
    finally:
        dicts.JSON_READER = saved


def test_the_timer_shapes_and_names_kept_stay_bounded(monkeypatch):
    """A slime log whose every Timer line has a name, or a shape, of its own keeps bounded caches,
    and reads every timer all the same."""
    monkeypatch.setattr(stream, "READ_BLOCK_BYTES", 4096)  # blocks after the first are read whole
    monkeypatch.setattr(plain, "TIMER_SHAPES", {})
    monkeypatch.setattr(plain, "TIMER_NAMES", {})
    count = plain._MAX_TIMER_NAMES + 200  # the first block is read apart (not whole): its names are not kept
    numbered = [f"n{n:05d}" for n in range(count)]  # one shape, a name each
    text = "".join(f"(A pid=1) [2026-08-21 10:00:00] timer.py:24 - Timer {name} start\n" for name in numbered)
    assert sorted(parse_stream(io.BytesIO(text.encode())).timers_open) == [(name, n) for n, name in enumerate(numbered, 1)]
    assert len(plain.TIMER_NAMES) == plain._MAX_TIMER_NAMES
    names = [f"t{'x' * (n % 190)}_{n}" for n in range(count)]  # 190 lengths of name, 7 widths of time: 1,330 shapes
    times = [f"{'1' * (1 + n % 7)}.5" for n in range(count)]
    text = "".join(f"(A pid=1) [2026-08-21 10:00:00] timer.py:32 - Timer {name} end (elapsed: {time}s)\n"
                   for name, time in zip(names, times, strict=True))
    parsed = parse_stream(io.BytesIO(text.encode()))
    assert [(timer.name, timer.elapsed_s) for timer in parsed.timers] == list(zip(names, map(float, times), strict=True))
    assert len(plain.TIMER_SHAPES) == plain._MAX_TIMER_SHAPES
