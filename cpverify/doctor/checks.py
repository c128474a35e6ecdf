"""The checks a CP run needs of a host, each a function of the facts (`CHECKS`), and the report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from cpverify.config import DEFAULT_DOCKER_HOST
from cpverify.doctor import probes
from cpverify.doctor.probes import Fact, Host, gather_facts
from cpverify.errors import EXIT_BLOCKED, EXIT_OK, InputError
from cpverify.versions import MIN_COMPUTE_CAPABILITY, MIN_CUDA, MIN_DRIVER, MIN_NCCL, parse_version

if TYPE_CHECKING:
    from cpverify.workload_python import WorkloadPython

SCHEMA_VERSION = 1

MIN_GPU_MEMORY_BYTES = 24e9  # "24 GB per GPU is enough for the smoke test" (seed 001); decimal GB
MIN_SHM_BYTES = 1 << 30
MIN_DOCKER_FREE_BYTES = 60e9  # the slime image unpacks to tens of GB
MIN_MODEL_FREE_BYTES = 5e9  # Qwen2.5-0.5B is about 1 GB; room for a second revision


@dataclass(frozen=True)
class HostCheck:
    name: str
    status: str  # pass | fail | warn | unknown
    value: str
    need: str
    fix: str = ""
    required: bool = False  # a required check that fails blocks the run (exit 4)
    why: str = ""


# ------------------------------------------------------------------------------------------- checks


def _gpu_list(facts: dict[str, Fact]) -> list[dict] | None:
    fact = facts["gpus"]
    return None if fact.error else fact.value["gpus"]


def _unknown(name: str, need: str, fact: Fact, required: bool = False) -> HostCheck:
    """A check that could not run: what it needs, and no fix (its fix presumes the fact it lacks;
    the collection error, cited under the tables, says what is missing)."""
    return HostCheck(name, "unknown", fact.error or "not collected", need, "", required)


def check_gpu_count(facts, cp) -> HostCheck:
    need = f">= {cp} GPUs (CP={cp} runs one rank per GPU)"
    fix = f"run on a host with {cp} or more visible GPUs (CUDA_VISIBLE_DEVICES, docker --gpus all)"
    gpus = _gpu_list(facts)
    if gpus is None:
        if facts["gpus"].absent:  # neither NVML nor nvidia-smi exists: no NVIDIA driver, so no GPU
            return HostCheck("gpu_count", "fail", f"0 ({facts['gpus'].error})", need,
                         "install the NVIDIA driver, or run inside a container started with --gpus all", True)
        return _unknown("gpu_count", need, facts["gpus"], True)
    return HostCheck("gpu_count", "pass" if len(gpus) >= cp else "fail", str(len(gpus)), need, fix, True)


def check_compute_capability(facts, cp) -> HostCheck:
    need = f"compute capability >= {MIN_COMPUTE_CAPABILITY} on every GPU (Ampere+: bf16, flash attention)"
    fix = "use Ampere (A100, RTX 30xx) or newer GPUs"
    gpus = _gpu_list(facts)
    caps = [g.get("compute_capability") for g in gpus or []]
    if not gpus or any(c is None for c in caps):
        return _unknown("compute_capability", need, facts["gpus"], True)
    low = [f"GPU{g['index']} {g['compute_capability']}" for g in gpus
           if (parse_version(g["compute_capability"]) or Version("0")) < MIN_COMPUTE_CAPABILITY]
    return HostCheck("compute_capability", "fail" if low else "pass", ", ".join(low) or ", ".join(sorted({str(c) for c in caps})),
                 need, fix, True)


def check_gpu_memory(facts, cp) -> HostCheck:
    need = f">= {MIN_GPU_MEMORY_BYTES / 1e9:.0f} GB per GPU"
    fix = "use GPUs with more memory, or shorten --max-tokens-per-gpu / --rollout-max-response-len"
    gpus = _gpu_list(facts)
    if not gpus or any(g.get("memory_mib") is None for g in gpus):
        return _unknown("gpu_memory", need, facts["gpus"])
    smallest = min(g["memory_mib"] for g in gpus) * 2**20
    return HostCheck("gpu_memory", "pass" if smallest >= MIN_GPU_MEMORY_BYTES else "warn",
                 f"smallest {smallest / 1e9:.1f} GB", need, fix)


def check_driver(facts, cp) -> HostCheck:
    need = f"NVIDIA driver >= {MIN_DRIVER}"
    fix = f"upgrade the NVIDIA driver to {MIN_DRIVER} or newer"
    gpus = _gpu_list(facts)
    if not gpus:
        return _unknown("driver_version", need, facts["gpus"])
    versions = sorted({g["driver_version"] for g in gpus})
    low = [v for v in versions if (parse_version(v) or Version("0")) < MIN_DRIVER]
    return HostCheck("driver_version", "warn" if low else "pass", ", ".join(versions), need, fix)


def check_same_driver(facts, cp) -> HostCheck:
    need = "one driver version on all GPUs"
    fix = "install the same NVIDIA driver on every node"
    gpus = _gpu_list(facts)
    if not gpus:
        return _unknown("driver_consistent", need, facts["gpus"], True)
    versions = sorted({g["driver_version"] for g in gpus})
    return HostCheck("driver_consistent", "pass" if len(versions) == 1 else "fail", ", ".join(versions), need, fix, True)


def check_cuda(facts, cp) -> HostCheck:
    need = f"CUDA >= {MIN_CUDA} (torch's runtime; else the driver's)"
    fix = f"use a torch / image built for CUDA {MIN_CUDA} or newer, and a driver that supports it"
    torch, gpus = facts["torch"], facts["gpus"]
    if torch.error is None and torch.value.get("cuda_runtime"):
        value, source = torch.value["cuda_runtime"], "torch runtime"
    elif gpus.error is None and gpus.value.get("cuda_driver_version"):
        value, source = gpus.value["cuda_driver_version"], "driver"
    else:
        return _unknown("cuda_version", need, torch if torch.error else gpus)
    ok = (parse_version(value) or Version("0")) >= MIN_CUDA
    return HostCheck("cuda_version", "pass" if ok else "warn", f"{value} ({source})", need, fix)


def check_nccl(facts, cp) -> HostCheck:
    need = f"NCCL >= {MIN_NCCL}"
    fix = f"use a torch / image with NCCL {MIN_NCCL} or newer (pip install -U nvidia-nccl-cu12)"
    torch, log = facts["torch"], facts["nccl_log"]
    found = [(v, s) for v, s in ((log.value, "log"), ((torch.value or {}).get("nccl"), "torch")) if v]
    if not found:
        return _unknown("nccl_version", need, torch)
    low = [f"{v} ({s})" for v, s in found if (parse_version(v) or Version("0")) < MIN_NCCL]
    return HostCheck("nccl_version", "warn" if low else "pass", ", ".join(low or [f"{v} ({s})" for v, s in found]),
                 need, fix)


def check_mig(facts, cp) -> HostCheck:
    need = "MIG disabled (NCCL cannot communicate between MIG instances)"
    fix = "disable MIG on these GPUs (an administrator: nvidia-smi -i <id> -mig 0) or use other GPUs"
    gpus = _gpu_list(facts)
    if not gpus:
        return _unknown("mig_disabled", need, facts["gpus"], True)
    enabled = [f"GPU{g['index']}" for g in gpus if (g.get("mig_mode") or "").lower() == "enabled"]
    return HostCheck("mig_disabled", "fail" if enabled else "pass", f"enabled on {', '.join(enabled)}" if enabled
                 else "disabled or not supported", need, fix, True)


def check_topology(facts, cp) -> HostCheck:
    need = f"GPU0..GPU{cp - 1} linked by NVLink or a PCIe switch"
    fix = "prefer NVLink-connected GPUs (CUDA_VISIBLE_DEVICES); across CPU sockets CP traffic is slower"
    topo = facts["topology"]
    if topo.error:
        return _unknown("gpu_topology", need, topo)
    wanted = {f"GPU{i}-GPU{j}" for i in range(cp) for j in range(i + 1, cp)}
    links = {pair: cell for pair, cell in topo.value["pairs"].items() if pair in wanted}
    if len(links) < len(wanted):
        return HostCheck("gpu_topology", "unknown", f"matrix shows {topo.value['gpus']} GPUs", need)
    slow = {p: c for p, c in links.items() if probes.link_class(c) in ("cpu-interconnect", "unknown")}
    value = ", ".join(f"{p} {c}" for p, c in sorted(links.items()))
    return HostCheck("gpu_topology", "warn" if slow else "pass", value, need, fix)


def check_shm(facts, cp) -> HostCheck:
    need = f">= {MIN_SHM_BYTES >> 30} GiB /dev/shm"
    why = ("NCCL's shared-memory transport and proxy buffers live in /dev/shm; Docker's default 64 MB "
           "gives 'NCCL WARN Error while creating shared memory segment'")
    fix = "docker run --shm-size=16g (or --ipc=host), as slime's docs do"
    shm = facts["shm"]
    if shm.error:
        return _unknown("dev_shm", need, shm)
    total = shm.value["total_bytes"]
    return HostCheck("dev_shm", "pass" if total >= MIN_SHM_BYTES else "warn", shown_size(total), need, fix, why=why)


def check_docker_gpu(facts, cp, *, required: bool = True) -> HostCheck:
    """Docker for the docker runner: an engine that answers (`required`: the arms run in its
    containers), and the NVIDIA runtime (a warning: `--gpus` also works through the runtime hook)."""
    need = "a Docker engine with the NVIDIA runtime (--runner docker)"
    docker = facts["docker"]
    if docker.error:
        _cause, problem, fix = probes.docker_engine_problem(docker.error, host=_docker_host(facts), absent=docker.absent)
        return HostCheck("docker_nvidia_runtime", "fail" if required else "warn", problem, need, fix, required)
    runtimes = docker.value["runtimes"]
    return HostCheck("docker_nvidia_runtime", "pass" if "nvidia" in runtimes else "warn",
                 f"engine {docker.value['server_version']}, runtimes: {', '.join(runtimes) or 'none'}", need,
                 "install the NVIDIA Container Toolkit, then: nvidia-ctk runtime configure --runtime=docker")


def _docker_host(facts) -> str:
    return (facts["docker"].value or {}).get("docker_host") or DEFAULT_DOCKER_HOST


def check_disk(facts, cp) -> HostCheck:
    need = f">= {MIN_DOCKER_FREE_BYTES / 1e9:.0f} GB free for the image, >= {MIN_MODEL_FREE_BYTES / 1e9:.0f} GB for the model"
    fix = "free disk space (docker system prune) or point HF_HOME / Docker's data-root at a larger disk"
    disk = facts["disk"]
    if disk.error:
        return _unknown("disk_free", need, disk)
    floors = {"docker images": MIN_DOCKER_FREE_BYTES, "model (HF cache)": MIN_MODEL_FREE_BYTES}
    short = [d for d in disk.value if d["free_bytes"] < floors[d["purpose"]]]
    value = ", ".join(f"{d['purpose']} {shown_size(d['free_bytes'])} free" for d in disk.value)
    return HostCheck("disk_free", "warn" if short else "pass", value, need, fix)


CHECKS: tuple[Callable[[dict, int], HostCheck], ...] = (
    check_gpu_count, check_compute_capability, check_gpu_memory, check_driver, check_same_driver, check_cuda,
    check_nccl, check_mig, check_topology, check_shm, check_disk,
)


def evaluate(facts: dict[str, Fact], cp: int) -> list[HostCheck]:
    out = []
    for check in CHECKS:
        try:
            out.append(check(facts, cp))
        except Exception as exc:  # noqa: BLE001 - a surprising fact shape must not kill the report
            out.append(HostCheck(check.__name__.removeprefix("check_"), "unknown",
                             f"could not evaluate: {type(exc).__name__}: {exc}", ""))
    return out


def is_blocked(checks: list[HostCheck]) -> bool:
    return any(c.required and c.status == "fail" for c in checks)


def check_workload_python(python: WorkloadPython, required: bool) -> HostCheck:
    """Can the workload's interpreter import what the workload imports? Required where cpverify
    runs the workload with it (the local runner); elsewhere the facts are the host's, for the record."""
    need = f"a Python that imports {' and '.join(python.needs)} (--python, CPVERIFY_PYTHON)"
    if python.ok:
        return HostCheck("workload_python", "pass", f"{python.path} ({python.chosen_by})", need, required=required)
    return HostCheck("workload_python", "fail" if required else "warn", python.problem(), need, python.fix(), required)


def collect(*, cp: int = 2, nccl_log: str | Path | None = None, host: Host | None = None,
            python: WorkloadPython | None = None, python_required: bool = False, docker: bool = False) -> dict:
    """The whole report as JSON-ready data: facts, checks, and whether a required check failed.
    With `python` (the workload's interpreter), torch, CUDA and NCCL are that interpreter's.
    `docker`: the arms run in Docker containers, so an engine must answer; without it Docker is a
    fact of the host and no check (the local and Ray runners need none)."""
    if cp < 1:
        raise InputError(f"--cp {cp} is not a CP size", "use --cp 2 (or another size >= 1)")
    if python is not None and host is None:
        host = Host(python=python.path)
    facts = gather_facts(host, nccl_log=Path(nccl_log) if nccl_log else None)
    checks = evaluate(facts, cp)
    if docker:
        checks.append(check_docker_gpu(facts, cp))
    if python is not None:
        facts["workload_python"] = Fact(python.to_json(), source=python.chosen_by)
        checks.append(check_workload_python(python, python_required))
    return {
        "schema_version": SCHEMA_VERSION,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cp": cp,
        "status": "blocked" if is_blocked(checks) else "ok",
        "facts": {name: fact.to_json() for name, fact in facts.items()},
        "checks": [asdict(c) for c in checks],
    }


def exit_code(report: dict) -> int:
    return EXIT_BLOCKED if report["status"] == "blocked" else EXIT_OK




def shown_size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"
