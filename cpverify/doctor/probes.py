"""Environment probes for `cpverify doctor`: each one isolated, none allowed to crash the report.

Every collector takes a `Host` (how to run commands, which environment, where / is) and returns a
`Fact`; a failure becomes `could not collect: <reason>` instead of an exception (the lesson of
torch's collect_env and vLLM's collect_env crashing in the broken environments they should
describe). Parsers are pure functions of recorded text, tested on real nvidia-smi output.

Never imports slime, sglang or megatron: package versions come from importlib.metadata, and torch
is asked in a subprocess (an import that segfaults or hangs must not take the report with it).
"""

from __future__ import annotations

import csv
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpverify.config import DEFAULT_DOCKER_HOST, DOCKER_HOST_ENV
from cpverify.redact import is_secret_name, scrub_credentials
from cpverify.terminal import strip_csi
from cpverify.versions import nccl_version

COMMAND_TIMEOUT_S = 20.0
TORCH_TIMEOUT_S = 90.0  # importing torch cold on a network filesystem can take a minute

ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "NVTE_", "PYTORCH_", "CUBLAS_", "CUDNN_", "NVIDIA_", "RAY_", "HF_")
PACKAGES = ("torch", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "transformer_engine", "flash_attn", "megatron-core",
            "sglang", "slime", "ray", "transformers", "docker", "huggingface_hub", "nvidia-ml-py")


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int  # 127: command not found, 124: timed out (the shell's conventions)
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def not_found(self) -> bool:
        return self.returncode == 127

    def reason(self) -> str:
        name = self.argv[0] if self.argv else "command"
        if self.not_found:
            return f"{name}: command not found"
        if self.returncode == 124:
            return f"{name}: timed out"
        tail = (self.stderr or self.stdout).strip().splitlines()
        return f"{name} exited {self.returncode}" + (f": {tail[-1].strip()}" if tail else "")


def run_command(argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> CommandResult:
    """Run a command without a shell; never raises."""
    try:
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout, errors="replace")
    except FileNotFoundError:
        return CommandResult(tuple(argv), 127, "", "command not found")
    except subprocess.TimeoutExpired:
        return CommandResult(tuple(argv), 124, "", f"timed out after {timeout:.0f}s")
    except OSError as exc:  # permission denied, exec format error
        return CommandResult(tuple(argv), 126, "", str(exc))
    return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Host:
    """Where the probes look. Tests swap `run` for recorded outputs and `root` for a temp dir."""

    run: Callable[..., CommandResult] = run_command
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: Path = Path("/")
    use_nvml: bool = True
    python: str = sys.executable

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")


@dataclass
class Fact:
    value: Any = None
    source: str = ""
    error: str | None = None  # "could not collect: <reason>"
    absent: bool = False  # the thing is known not to exist (no NVIDIA driver), not merely unreadable
    elapsed_s: float | None = None

    def to_json(self) -> dict:
        out = {"value": self.value, "source": self.source, "error": self.error, "elapsed_s": self.elapsed_s}
        if self.absent:
            out["absent"] = True
        return out


COULD_NOT_COLLECT = "could not collect: "


def missing(reason: str, *, absent: bool = False) -> Fact:
    return Fact(error=f"{COULD_NOT_COLLECT}{reason}", absent=absent)


def isolated(collector: Callable[..., Fact], *args: Any) -> Fact:
    """Run one collector; any exception becomes a 'could not collect' fact. Records how long it took."""
    start = time.monotonic()
    try:
        fact = collector(*args)
    except Exception as exc:  # noqa: BLE001 - one probe must never kill the report
        fact = missing(f"{type(exc).__name__}: {exc}")
    fact.elapsed_s = round(time.monotonic() - start, 3)
    return fact


# ------------------------------------------------------------------------------------------ parsers

_NA = {"[n/a]", "n/a", "[not supported]", "not supported", ""}
SMI_QUERY = "index,name,compute_cap,memory.total,driver_version,mig.mode.current"
SMI_QUERY_OLD = "index,name,memory.total,driver_version,mig.mode.current"  # nvidia-smi before 510: no compute_cap


def _na(text: str) -> str | None:
    text = text.strip()
    return None if text.lower() in _NA else text


def parse_smi_gpus(text: str, fields: str = SMI_QUERY) -> list[dict]:
    """`nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` -> one dict per GPU."""
    names = fields.split(",")
    gpus = []
    for row in csv.reader(text.strip().splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(names):
            raise ValueError(f"expected {len(names)} columns ({fields}), got {len(row)}: {row!r}")
        cell = dict(zip(names, (_na(c) for c in row), strict=True))
        memory = cell.get("memory.total")
        gpus.append({
            "index": int(cell["index"]),  # type: ignore[arg-type]  # n/a (None) fails as any bad cell
            "name": cell["name"],
            "compute_capability": cell.get("compute_cap"),
            "memory_mib": int(float(memory)) if memory else None,
            "driver_version": cell["driver_version"],
            "mig_mode": cell.get("mig.mode.current"),
        })
    return gpus


def parse_smi_cuda_version(text: str) -> str | None:
    """The driver's CUDA version from plain `nvidia-smi`'s header ('CUDA Version: 13.0')."""
    match = re.search(r"CUDA Version\s*:\s*([\d.]+)", text)
    return match.group(1) if match else None


_DEVICE = re.compile(r"^(GPU|NIC)\d+$")


def parse_topo_matrix(text: str) -> dict:
    """`nvidia-smi topo -m` -> {"devices": [...], "pairs": {"GPU0-GPU1": "NV18", ...}}.

    Cells are single tokens (X, NV#, PIX, PXB, PHB, NODE, SYS); the header lists the device
    columns first, then CPU/NUMA affinity columns, which are ignored.
    """
    # nvidia-smi 580 underlines the header with ANSI codes even when writing to a pipe.
    lines = [ln for ln in strip_csi(text).splitlines() if ln.strip()]
    header_at = next((i for i, ln in enumerate(lines) if ln.split() and _DEVICE.match(ln.split()[0])
                      and not ln[:1].strip()), None)
    if header_at is None:
        raise ValueError("no device header row (a line starting with whitespace, then GPU0 ...)")
    columns = []
    for token in lines[header_at].split():
        if not _DEVICE.match(token):
            break
        columns.append(token)
    pairs = {}
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if not tokens or not _DEVICE.match(tokens[0]):
            break
        row = tokens[0]
        for col, cell in zip(columns, tokens[1 : 1 + len(columns)], strict=False):
            if row.startswith("GPU") and col.startswith("GPU") and row != col:
                key = "-".join(sorted((row, col), key=lambda d: int(d[3:])))
                pairs[key] = cell
    gpus = [c for c in columns if c.startswith("GPU")]
    return {"devices": columns, "gpus": len(gpus), "pairs": pairs}


def link_class(cell: str) -> str:
    """'NV18' -> 'nvlink'; PIX/PXB -> 'pcie-switch'; PHB -> 'pcie-host-bridge'; NODE/SYS -> 'cpu-interconnect'."""
    cell = cell.upper()
    if re.fullmatch(r"NV\d+", cell):
        return "nvlink"
    return {"PIX": "pcie-switch", "PXB": "pcie-switch", "PHB": "pcie-host-bridge",
            "NODE": "cpu-interconnect", "SYS": "cpu-interconnect"}.get(cell, "unknown")


def nccl_version_from_log(path: Path) -> str | None:
    """The first NCCL version a log states, as NCCL prints it: `2.28.9+cuda13.0`."""
    with open(path, encoding="utf-8", errors="replace") as log:  # streamed: logs can be huge
        for line in log:
            if "NCCL INFO" in line and (stated := nccl_version(line)):
                version, cuda = stated
                return f"{version}+cuda{cuda}" if cuda else version
    return None


def filter_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables that shape a GPU run, minus secret-named ones; credentials in the rest (a mirror's
    URL password, a signed query) scrubbed."""
    return {name: scrub_credentials(value) for name, value in sorted(env.items())
            if name.startswith(ENV_PREFIXES) and not is_secret_name(name)}


# --------------------------------------------------------------------------------------- collectors


def collect_gpus(host: Host) -> Fact:
    """GPUs through NVML (nvidia-ml-py), else through `nvidia-smi --query-gpu`."""
    reasons, absent = [], []
    if host.use_nvml:
        try:
            return Fact(_nvml_gpus(), source="nvml (nvidia-ml-py)")
        except Exception as exc:  # noqa: BLE001
            reasons.append(f"NVML: {exc or type(exc).__name__}")
            absent.append("not found" in str(exc).lower() or isinstance(exc, ImportError))
    for fields in (SMI_QUERY, SMI_QUERY_OLD):
        result = host.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
        if result.ok:
            header = host.run(["nvidia-smi"])
            gpus = parse_smi_gpus(result.stdout, fields)
            return Fact({"gpus": gpus, "cuda_driver_version": parse_smi_cuda_version(header.stdout)},
                        source=f"nvidia-smi --query-gpu={fields}")
        if result.not_found or "valid field" not in (result.stdout + result.stderr):
            break  # only an old nvidia-smi rejecting compute_cap is worth a second query
    reasons.append(result.reason())
    absent.append(result.not_found)
    return missing("; ".join(reasons), absent=all(absent))


def _nvml_gpus() -> dict:
    import pynvml  # nvidia-ml-py

    def text(value) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    pynvml.nvmlInit()
    try:
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            try:
                current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
                mig = "Enabled" if current == pynvml.NVML_DEVICE_MIG_ENABLE else "Disabled"
            except pynvml.NVMLError:  # not supported on this GPU
                mig = None
            gpus.append({
                "index": index,
                "name": text(pynvml.nvmlDeviceGetName(handle)),
                "compute_capability": f"{major}.{minor}",
                "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
                "driver_version": driver,  # one driver per host: NVML reports it system-wide
                "mig_mode": mig,
            })
    finally:
        pynvml.nvmlShutdown()
    return {"gpus": gpus, "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}"}


_TORCH_SNIPPET = r"""
import json
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda_runtime"] = torch.version.cuda
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as e:
        out["nccl_error"] = f"{type(e).__name__}: {e}"
    out["cuda_available"] = torch.cuda.is_available()
    out["device_count"] = torch.cuda.device_count()
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print("CPVERIFY-TORCH " + json.dumps(out))
"""


def collect_torch(host: Host) -> Fact:
    """torch, its CUDA runtime and its NCCL, asked in a subprocess."""
    result = host.run([host.python, "-c", _TORCH_SNIPPET], TORCH_TIMEOUT_S)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("CPVERIFY-TORCH ")), None)
    if line is None:
        return missing(result.reason())
    data = json.loads(line[len("CPVERIFY-TORCH ") :])
    if "error" in data:
        return missing(f"{host.python}: {data['error']}")
    return Fact(data, source=f"{host.python}: import torch (subprocess)")


def collect_topology(host: Host) -> Fact:
    result = host.run(["nvidia-smi", "topo", "-m"])
    if not result.ok:
        return missing(result.reason(), absent=result.not_found)
    return Fact({**parse_topo_matrix(result.stdout), "raw": result.stdout.rstrip("\n")}, source="nvidia-smi topo -m")


def collect_infiniband(host: Host) -> Fact:
    sysfs = host.path("/sys/class/infiniband")
    devices = sorted(p.name for p in sysfs.iterdir()) if sysfs.is_dir() else []
    return Fact({"devices": devices, "dev_infiniband": host.path("/dev/infiniband").exists()},
                source="/sys/class/infiniband, /dev/infiniband")


def collect_shm(host: Host) -> Fact:
    usage = shutil.disk_usage(host.path("/dev/shm"))
    return Fact({"total_bytes": usage.total, "free_bytes": usage.free}, source="statvfs /dev/shm")


DOCKER_FIXES = {
    "not_installed": ("install Docker Engine (https://docs.docker.com/engine/install/) and the NVIDIA Container "
                      "Toolkit; or run without Docker: --runner local"),
    "permission": ("add your user to the docker group (`sudo usermod -aG docker $USER`, then log in again), or point "
                   "DOCKER_HOST at an engine you may use (rootless Docker)"),
    "not_running": ("start dockerd (`sudo systemctl start docker`; rootless: `systemctl --user start docker`; in CI "
                    "`bash .ci/docker-up.sh`), or set DOCKER_HOST to the engine's address"),
    "no_answer": "check `docker info`; start dockerd or set DOCKER_HOST to a running engine",
}
_DOCKER_NOT_RUNNING = ("Cannot connect to the Docker daemon", "No such file", "Connection refused", "FileNotFoundError",
                       "ConnectionRefused")


def docker_engine_problem(error: str, *, host: str, absent: bool = False) -> tuple[str, str, str]:
    """Why no Docker engine answers, from what docker-py and the docker CLI said: (cause, problem,
    fix), the cause a key of DOCKER_FIXES. `absent`: there is no docker command at all."""
    if "Permission denied" in error or "PermissionError" in error:
        cause, problem = "permission", f"permission denied on the Docker socket ({host})"
    elif absent:
        cause, problem = "not_installed", "Docker is not installed (no docker command)"
    elif any(sign in error for sign in _DOCKER_NOT_RUNNING):
        cause, problem = "not_running", f"no Docker engine answers at {host}"
    else:
        cause, problem = "no_answer", f"the Docker engine at {host} does not answer: {error}"
    return cause, problem, DOCKER_FIXES[cause]


def collect_docker(host: Host) -> Fact:
    """Engine version, runtimes, root dir: docker-py when importable, else `docker info`."""
    try:
        import docker  # docker-py: optional
    except ImportError:
        docker = None
    if docker is not None and not hasattr(docker, "from_env"):
        # A folder named docker/ on sys.path (this repository has one) imports as a namespace package.
        where = sorted(set(getattr(docker, "__path__", [])))
        sdk_reason = f"docker-py not installed ('docker' resolves to the folder {', '.join(where) or '?'})"
        docker = None
    elif docker is None:
        sdk_reason = "docker-py not installed"
    if docker is not None:
        try:
            client = docker.from_env(timeout=10)
            try:
                return Fact(_docker_summary(client.info()), source="docker-py")
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - fall through to the CLI, then report both
            sdk_reason = f"docker-py: {exc}"
    result = host.run(["docker", "info", "--format", "{{json .}}"])
    if not result.ok:
        fact = missing(f"{sdk_reason}; {result.reason()}", absent=result.not_found)
        fact.value = {"docker_host": host.env.get(DOCKER_HOST_ENV) or DEFAULT_DOCKER_HOST}  # where no engine answered
        return fact
    return Fact(_docker_summary(json.loads(result.stdout)), source="docker info")


def _docker_summary(info: dict) -> dict:
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return {"server_version": info.get("ServerVersion"), "runtimes": runtimes,
            "default_runtime": info.get("DefaultRuntime"), "root_dir": info.get("DockerRootDir")}


def hf_cache_dir(env: Mapping[str, str]) -> Path:
    """huggingface_hub's cache location rules (HF_HUB_CACHE > HF_HOME/hub > XDG_CACHE_HOME/huggingface/hub)."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path(env.get("HOME", "~")).expanduser() / ".cache"
    return base / "huggingface" / "hub"


def free_bytes(path: Path) -> tuple[Path, int]:
    """Free bytes on the filesystem that holds (or would hold) `path`: its nearest existing ancestor."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, shutil.disk_usage(probe).free


def collect_disk(host: Host, docker_root: str | None) -> Fact:
    targets = [("model (HF cache)", hf_cache_dir(host.env))]
    if docker_root:
        targets.insert(0, ("docker images", Path(docker_root)))
    out = []
    for purpose, path in targets:
        measured_at, free = free_bytes(host.path(str(path)) if path.is_absolute() else path)
        out.append({"purpose": purpose, "path": str(path), "measured_at": str(measured_at), "free_bytes": free})
    return Fact(out, source="statvfs")


def collect_env(host: Host) -> Fact:
    return Fact(filter_env(host.env), source=f"environment, prefixes {','.join(ENV_PREFIXES)}, secrets dropped")


def collect_packages(host: Host) -> Fact:
    """Versions from package metadata only (never importing the packages under test)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return Fact(versions, source=f"importlib.metadata of {sys.executable}")


def collect_host(host: Host) -> Fact:
    return Fact({"os": platform.platform(), "kernel": platform.release(), "python": platform.python_version(),
                 "cpus": os.cpu_count()}, source="platform")


def collect_nccl_log(host: Host, log: Path | None) -> Fact:
    if log is None:
        return missing("no log given (--nccl-log FILE with NCCL_DEBUG=INFO output)")
    version = nccl_version_from_log(log)
    if version is None:
        return missing(f"no 'NCCL INFO NCCL version' line in {log}; run with NCCL_DEBUG=INFO")
    return Fact(version, source=str(log))


def gather_facts(host: Host | None = None, *, nccl_log: Path | None = None) -> dict[str, Fact]:
    host = host or Host()
    facts = {
        "host": isolated(collect_host, host),
        "gpus": isolated(collect_gpus, host),
        "torch": isolated(collect_torch, host),
        "nccl_log": isolated(collect_nccl_log, host, nccl_log),
        "topology": isolated(collect_topology, host),
        "infiniband": isolated(collect_infiniband, host),
        "shm": isolated(collect_shm, host),
        "docker": isolated(collect_docker, host),
    }
    docker_root = (facts["docker"].value or {}).get("root_dir") if facts["docker"].error is None else None
    facts["disk"] = isolated(collect_disk, host, docker_root)
    facts["packages"] = isolated(collect_packages, host)
    facts["env"] = isolated(collect_env, host)
    return facts
