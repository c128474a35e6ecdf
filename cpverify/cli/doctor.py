"""`cpverify doctor`: this host's facts and the checks a CP run needs (exit 4 when a required one fails).

`python -m cpverify.doctor` runs this command alone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cpverify import config
from cpverify.artifacts import atomic_write_json
from cpverify.config import RUNNERS
from cpverify.doctor import collect, exit_code, render
from cpverify.doctor.checks import MIN_GPU_MEMORY_BYTES, MIN_SHM_BYTES
from cpverify.errors import InputError
from cpverify.redact import Redactor
from cpverify.runners import runner_class
from cpverify.versions import MIN_COMPUTE_CAPABILITY, MIN_CUDA, MIN_DRIVER, MIN_NCCL
from cpverify.workload_python import requested_python, workload_python

DESCRIPTION = f"""\
Can this host run a CP verification? Prints the facts an issue report needs (GPUs, driver,
CUDA, NCCL, topology, MIG, InfiniBand, /dev/shm, disk, Docker, the relevant environment
variables) and checks them. Required (a failure blocks the run): at least --cp GPUs, compute
capability >= {MIN_COMPUTE_CAPABILITY}, one driver version on all GPUs, MIG off. Warnings: driver >= {MIN_DRIVER}, \
CUDA >= {MIN_CUDA},
NCCL >= {MIN_NCCL}, {MIN_GPU_MEMORY_BYTES / 1e9:.0f} GB per GPU, NVLink or a PCIe switch between the GPUs, \
>= {MIN_SHM_BYTES >> 30} GiB /dev/shm,
free disk. With --runner docker (the default of `cpverify run`) a Docker engine must answer
(required) and the NVIDIA runtime is checked (a warning); the local and Ray runners need no Docker.
What cannot be collected is reported as "could not collect: <reason>", and the checks that needed
it as unknown; every check that ran and did not pass names its fix.

Exit code: 0 when no required check fails, 4 (BLOCKED) when one does. `cpverify run`
runs the same checks as its first step and records the report in env.json."""


def register(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="environment facts and checks for a CP run (exit 4 when blocked)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--cp", type=int, default=2, help="the CP size to check for (default 2)")
    p.add_argument("--nccl-log", type=Path, default=None, help="a log with NCCL_DEBUG=INFO lines (NCCL version)")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON report to this file")
    p.add_argument("--runner", choices=RUNNERS, default=config.runner(),
                   help="the runner the run will use: docker needs a Docker engine, local and ray none "
                        "(default: %(default)s; CPVERIFY_RUNNER sets it)")
    p.add_argument("--python", default=None,
                   help="the Python whose torch, CUDA and NCCL to report (default: CPVERIFY_PYTHON, else the "
                        "first python3/python on PATH that imports torch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.nccl_log is not None and not args.nccl_log.is_file():
        raise InputError(f"--nccl-log {args.nccl_log}: no such file", "pass a log file written with NCCL_DEBUG=INFO")
    explicit, chosen_by = requested_python(args.python)
    python = workload_python(explicit, chosen_by=chosen_by)
    # What the doctor prints or writes is pasted into issues: redacted like verdict.md (a RAY_ or
    # HF_ variable may hold a URL with a password; paths and hosts identify the machine).
    report = Redactor().json(collect(cp=args.cp, nccl_log=args.nccl_log, python=python,
                                     docker=runner_class(args.runner).isolated))
    if args.json_out is not None:
        atomic_write_json(args.json_out, report, flag="--json-out")
    print(json.dumps(report, indent=2) if args.json else render(report))
    return exit_code(report)
