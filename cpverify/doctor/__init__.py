"""`cpverify doctor`: can this host run slime at CP=N, and what should an issue report say about it?

Collects facts (GPUs, driver, CUDA, NCCL, topology, MIG, InfiniBand, /dev/shm, disk, Docker,
relevant environment variables) and checks them against the requirements of the CP verification
procedure (seed 001: the stack's minimums in cpverify.versions, one driver on all GPUs, 24 GB per
GPU). Every probe is isolated: a missing tool becomes "could not collect: <reason>".

Exit code: 0 when no required check fails; 4 (BLOCKED) when one does.
`collect()` returns the same report as a dict, for the orchestrator's env.json.
"""

from cpverify.doctor.checks import HostCheck, collect, evaluate, exit_code, is_blocked
from cpverify.doctor.probes import gather_facts
from cpverify.doctor.render import render

__all__ = ["HostCheck", "collect", "evaluate", "exit_code", "gather_facts", "is_blocked", "render"]
