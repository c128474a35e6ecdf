"""Inputs a real user's log, launch script or command line may hold, each against the claim it could
break: a number printed in another spelling, a sameness only part of a log shows, a count or a line
that grows without bound, a credential in a form no rule named yet. Logs are built in slime's real
line formats (tests/helpers/slime_log.py), parsed by the real parser and judged by the real decide().
"""

from __future__ import annotations

import math
import re
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_verdict_claims import PROPERTY, forced, judge, pair, parsed

from cpverify import verdict as v
from cpverify.errors import EXIT_USAGE, InputError
from cpverify.given_logs import BUNDLED_LINE_MAX_BYTES
from cpverify.overrides import resolve_profile
from cpverify.redact import Redactor

# -- numerics: a loss printed as not finite, in any spelling a printer uses ------------------------

# What Python (repr, %f), JSON (json.dumps), C (printf: -nan) and `{:E}` (Megatron's loss) print for
# a number that is not finite, and the scalars numpy 2 and torch print around it.
NONFINITE_SPELLINGS = ("nan", "NaN", "NAN", "-nan", "inf", "-inf", "+inf", "Infinity", "-Infinity", "INF", "'nan'",
                       "'NaN'", '"Infinity"')
SCALAR_WRAPPERS = ("{}", "np.float64({})", "numpy.float32({})", "tensor({})", "tensor({}, device='cuda:0')")


@PROPERTY
@given(spelling=st.sampled_from(NONFINITE_SPELLINGS), wrapper=st.sampled_from(SCALAR_WRAPPERS),
       metric=st.sampled_from(("train/loss", "train/grad_norm", "train/pg_loss")), in_base=st.booleans(),
       step=st.integers(0, 7))
def test_a_loss_printed_not_finite_fails_however_it_is_spelled(spelling, wrapper, metric, in_base, step):
    base, cand = pair()
    log = base if in_base else cand
    line = log.marks["step"][step] - 1
    printed = wrapper.format(spelling) if "(" not in wrapper or "'" not in spelling else spelling
    log.lines[line] = re.sub(rf"'{metric}': [^,}}]+", f"'{metric}': {printed}", log.lines[line])
    verdict = judge(base, cand)
    assert verdict.status == v.FAIL
    assert forced(verdict, "numerics_finite", "cp1" if in_base else "cp2") == {v.FAIL}


# -- resources: time linear in a line, whatever its shape --------------------------------------------

def cpu_bounded(seconds: float, work, *args):
    """work(*args), interrupted with TimeoutError once it has used `seconds` of CPU time (re's
    matcher checks for signals: a match that backtracks for minutes stops here)."""
    def expire(*_):
        raise TimeoutError(f"over {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return work(*args)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


# Lines a rule could backtrack over for time quadratic in their length: long dotted runs (a module
# path, a host, a version) after a word that opens the credential rules, URLs, NCCL's host prefix.
# Each is half as long as a line the bundle copies (and so redacts).
HALF = BUNDLED_LINE_MAX_BYTES // 4
PATHOLOGICAL_LINES = {
    "dotted run after a URL": "http://" + "a." * HALF,
    "dotted run after a secret-ish word": "token " + "a." * HALF,
    "schemes side by side": "a://" * (HALF // 2),
    "dotted run before an NCCL prefix": "9." * HALF + " :1:2 [0] NCCL INFO x",
}


@pytest.mark.parametrize("line", PATHOLOGICAL_LINES.values(), ids=PATHOLOGICAL_LINES.keys())
def test_a_long_line_of_any_shape_is_redacted_in_linear_time(line):
    assert cpu_bounded(15.0, Redactor(), line).count("\n") == 0


@pytest.mark.parametrize("stated", ["dump", "plan"])
def test_a_rollout_count_of_any_size_is_judged_in_time_independent_of_it(stated):
    base, cand = pair(arguments={"num_rollout": 10**18} if stated == "dump" else None)
    evidence = [v.ArmEvidence("cp1", 1, parsed(base)), v.ArmEvidence("cp2", 2, parsed(cand))]
    if stated == "plan":
        for arm in evidence:
            arm.expected_rollouts = 10**18
    verdict = cpu_bounded(20.0, lambda: v.decide(evidence, comparisons=[("cp1", "cp2")],
                                                  thresholds=v.Thresholds(resamples=500)))
    assert verdict.status == v.INCONCLUSIVE and forced(verdict, "complete") == {v.INCONCLUSIVE}


# -- thresholds: a number that is no number the rule can hold -----------------------------------------

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


@PROPERTY
@given(pass_ratio=ANY_FLOAT, tolerance=ANY_FLOAT)
def test_a_threshold_is_taken_exactly_when_it_is_a_finite_number_in_its_range(pass_ratio, tolerance):
    """NaN compares false with everything and an infinite ratio or tolerance passes everything:
    the verdict takes a pass ratio in (0, inf) and a numerics tolerance in [0, inf), nothing else."""
    taken = 0 < pass_ratio < math.inf and 0 <= tolerance < math.inf
    try:
        v.Thresholds(pass_ratio=pass_ratio, numerics_tolerance=tolerance)
    except InputError as refused:
        assert not taken and refused.exit_code == EXIT_USAGE and "--pass-ratio 1.3" in refused.fix
    else:
        assert taken


@pytest.mark.parametrize("ratio", ["inf", "-inf", "nan", "1e400", "0", "-1.3"])
def test_cpverify_verdict_refuses_a_pass_ratio_that_is_no_finite_positive_number(tmp_path, capsys, ratio):
    from cpverify.cli import main

    base, cand = pair()
    code = main(["verdict", "--baseline", str(base.write(tmp_path / "cp1.log")), "--candidate",
                 str(cand.write(tmp_path / "cp2.log")), "--out", str(tmp_path / "out"), f"--pass-ratio={ratio}"])
    assert code == EXIT_USAGE and "--pass-ratio 1.3" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ratio", ["inf", "nan", "1e400", "0", "-1.3"])
def test_a_profile_refuses_a_pass_ratio_that_is_no_finite_positive_number(ratio):
    """`cpverify run --set pass_ratio=R` and an override file: refused when the profile is resolved."""
    with pytest.raises(InputError) as refused:
        resolve_profile("smoke", assignments=[f"pass_ratio={ratio}"])
    assert refused.value.exit_code == EXIT_USAGE and "pass_ratio" in refused.value.problem
