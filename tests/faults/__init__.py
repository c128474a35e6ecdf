"""The fault-injection suite: bad input, faults during a run, secrets, hostile logs.

Every test drives the real `cpverify` (as a child process, as users run it) against real
subprocesses and the real Docker engine. slime itself cannot run here (GPUs, Megatron,
SGLang), so the workload is tests/fake_slime/train.py, which prints slime's log formats and
injects faults on request; its ledger (FAKE_SLIME_LEDGER) records every line it emitted, so
a test can prove that the log on disk holds each line printed before the fault.
"""
