"""cpverify doctor: parsers on outputs recorded on 2×H200, checks, and a real run on this GPU-less box.

Recorded data (tests/data/doctor/, from benchmarks/run_probe_device.sh on nvidia-h200-x2):
h200x2-query-gpu.csv, h200x2-nvidia-smi.txt, h200x2-topo-m.txt (ANSI codes as nvidia-smi 580
writes them), h200x2-nccl-info.log (NCCL_DEBUG=INFO lines of the bandwidth run); h200x4-topo-m.txt
from nvidia-h200-x4.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpverify import doctor
from cpverify.cli import main
from cpverify.doctor import checks as host_checks
from cpverify.doctor import probes
from cpverify.doctor.probes import CommandResult, Fact, Host

DATA = Path(__file__).parent / "data" / "doctor"
REPO = Path(__file__).resolve().parents[1]


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------- parsers


def test_query_gpu_csv_recorded_on_h200():
    gpus = probes.parse_smi_gpus(recorded("h200x2-query-gpu.csv"))
    assert [g["index"] for g in gpus] == [0, 1]
    assert {g["name"] for g in gpus} == {"NVIDIA H200"}
    assert {g["compute_capability"] for g in gpus} == {"9.0"}
    assert {g["memory_mib"] for g in gpus} == {143771}
    assert {g["driver_version"] for g in gpus} == {"580.159.04"}
    assert {g["mig_mode"] for g in gpus} == {"Disabled"}


def test_query_gpu_csv_not_available_cells_and_old_driver_fields():
    """Hand-made in nvidia-smi's format: a GPU without MIG support, and the pre-510 field list."""
    text = "0, NVIDIA GeForce RTX 3090, 24576, 470.82.01, [N/A]\n"
    (gpu,) = probes.parse_smi_gpus(text, probes.SMI_QUERY_OLD)
    assert gpu["compute_capability"] is None
    assert gpu["mig_mode"] is None
    assert gpu["memory_mib"] == 24576


def test_query_gpu_csv_wrong_column_count_is_an_error():
    with pytest.raises(ValueError, match="expected 6 columns"):
        probes.parse_smi_gpus("0, NVIDIA H200, 9.0\n")


def test_cuda_version_from_recorded_nvidia_smi_header():
    assert probes.parse_smi_cuda_version(recorded("h200x2-nvidia-smi.txt")) == "13.0"
    assert probes.parse_smi_cuda_version("no header here") is None


def test_topology_recorded_on_h200_with_ansi_underline():
    topo = probes.parse_topo_matrix(recorded("h200x2-topo-m.txt"))
    assert "\x1b[4m" in recorded("h200x2-topo-m.txt")  # the real header is underlined
    assert topo["devices"] == ["GPU0", "GPU1"]
    assert topo["pairs"] == {"GPU0-GPU1": "NV18"}
    assert probes.link_class("NV18") == "nvlink"


def test_topology_recorded_on_four_h200():
    topo = probes.parse_topo_matrix(recorded("h200x4-topo-m.txt"))
    assert topo["gpus"] == 4
    assert len(topo["pairs"]) == 6 and set(topo["pairs"].values()) == {"NV18"}
    facts = {"topology": Fact(topo)}
    assert host_checks.check_topology(facts, 4).status == "pass"


PCIE_TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tPIX\tNODE\tSYS\tNODE\t0-15\t0\t\tN/A
GPU1\tPIX\t X \tNODE\tSYS\tNODE\t0-15\t0\t\tN/A
GPU2\tNODE\tNODE\t X \tSYS\tPIX\t0-15\t0\t\tN/A
GPU3\tSYS\tSYS\tSYS\t X \tSYS\t16-31\t1\t\tN/A
NIC0\tNODE\tNODE\tPIX\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)

NIC Legend:

  NIC0: mlx5_0
"""


def test_topology_pcie_host_with_nic_rows():
    """Hand-made in `nvidia-smi topo -m`'s format: 4 PCIe GPUs over two sockets and a NIC."""
    topo = probes.parse_topo_matrix(PCIE_TOPO)
    assert topo["gpus"] == 4
    assert topo["pairs"]["GPU0-GPU1"] == "PIX"
    assert topo["pairs"]["GPU0-GPU3"] == "SYS"
    assert len(topo["pairs"]) == 6  # GPU pairs only, each once
    assert probes.link_class("PIX") == "pcie-switch"
    assert probes.link_class("SYS") == "cpu-interconnect"


def test_topology_without_a_matrix_is_an_error():
    with pytest.raises(ValueError, match="no device header"):
        probes.parse_topo_matrix("Failed to initialize NVML: Driver/library version mismatch\n")


def test_nccl_version_from_recorded_log(tmp_path):
    assert probes.nccl_version_from_log(DATA / "h200x2-nccl-info.log") == "2.28.9+cuda13.0"
    channels = tmp_path / "channels.log"
    channels.write_text("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n")
    assert probes.nccl_version_from_log(channels) is None


def test_env_filter_keeps_gpu_settings_and_drops_secrets():
    env = {
        "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": "/data/hf", "PATH": "/usr/bin",
        "HF_TOKEN": "hf_secret", "RAY_REDIS_PASSWORD": "pw", "NVIDIA_API_KEY": "k", "HF_HUB_AUTH_HEADER": "x",
        "TORCH_SECRET_THING": "s", "NCCL_IB_CREDENTIALS": "c",
        "HF_ENDPOINT": "https://alice:s3cret@mirror.example/hub",
    }
    kept = probes.filter_env(env)
    assert kept == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_ENDPOINT": "https://<redacted:secret>@mirror.example/hub",
                    "HF_HOME": "/data/hf", "NCCL_DEBUG": "INFO"}
    assert "s3cret" not in json.dumps(kept)


def test_doctor_output_carries_no_credentials_or_host_names(tmp_path, monkeypatch, capsys):
    """`doctor --json`, `--json-out` and the table are pasted into issues: a RAY_ADDRESS or HF_ENDPOINT
    with a password or a token in its query, and the host it names, appear in none of them."""
    from cpverify.cli import main

    monkeypatch.setenv("RAY_ADDRESS", "http://admin:ray-pw-6a2f81@ray-head.corp.example.com:8265")
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.corp.example.com/?token=mirror-tok-83bd27")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    for extra in (["--json", "--json-out", str(tmp_path / "doctor.json")], []):
        main(["doctor", *extra])
        out = capsys.readouterr()
        shown = out.out + out.err + ((tmp_path / "doctor.json").read_text() if extra else "")
        for planted in ("ray-pw-6a2f81", "mirror-tok-83bd27", "corp.example.com"):
            assert planted not in shown, (planted, extra)
        assert "NCCL_SOCKET_IFNAME" in shown and "http://<redacted:secret>@host-" in shown


def test_hf_cache_dir_follows_huggingface_hub_rules():
    assert probes.hf_cache_dir({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert probes.hf_cache_dir({"HF_HOME": "/b"}) == Path("/b/hub")
    assert probes.hf_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert probes.hf_cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/huggingface/hub")


def test_free_bytes_measures_the_nearest_existing_parent(tmp_path):
    measured_at, free = probes.free_bytes(tmp_path / "not" / "yet" / "there")
    assert measured_at == tmp_path
    assert free > 0


# ------------------------------------------------------------------------------------- collectors


def fake_nvidia_host(tmp_path: Path, outputs: dict[tuple[str, ...], CommandResult]) -> Host:
    """A host whose commands answer from recorded outputs (test double: no NVIDIA driver exists here)."""

    def run(argv, timeout=None):
        for prefix in sorted(outputs, key=len, reverse=True):  # the most specific recording wins
            if tuple(argv[: len(prefix)]) == prefix:
                return outputs[prefix]
        return CommandResult(tuple(argv), 127, "", "command not found")

    (tmp_path / "dev" / "shm").mkdir(parents=True)
    return Host(run=run, env={"NCCL_DEBUG": "WARN", "HF_TOKEN": "hf_x", "HOME": str(tmp_path)},
                root=tmp_path, use_nvml=False, python="python-under-test")


def h200_outputs() -> dict:
    torch_line = 'CPVERIFY-TORCH {"torch": "2.11.0+cu130", "cuda_runtime": "13.0", "nccl": "2.28.9", ' \
                 '"cuda_available": true, "device_count": 2}'
    return {
        ("nvidia-smi", f"--query-gpu={probes.SMI_QUERY}"): CommandResult((), 0, recorded("h200x2-query-gpu.csv")),
        ("nvidia-smi", "topo"): CommandResult((), 0, recorded("h200x2-topo-m.txt")),
        ("nvidia-smi",): CommandResult((), 0, recorded("h200x2-nvidia-smi.txt")),
        ("python-under-test",): CommandResult((), 0, torch_line + "\n"),
    }


def test_collect_on_recorded_h200_outputs_passes(tmp_path):
    report = doctor.collect(cp=2, nccl_log=DATA / "h200x2-nccl-info.log", host=fake_nvidia_host(tmp_path, h200_outputs()))
    checks = {c["name"]: c for c in report["checks"]}
    assert report["status"] == "ok" and doctor.exit_code(report) == 0
    for name in ("gpu_count", "compute_capability", "gpu_memory", "driver_version", "driver_consistent",
                 "cuda_version", "nccl_version", "mig_disabled", "gpu_topology"):
        assert checks[name]["status"] == "pass", checks[name]
    assert checks["nccl_version"]["value"] == "2.28.9+cuda13.0 (log), 2.28.9 (torch)"
    assert checks["gpu_topology"]["value"] == "GPU0-GPU1 NV18"
    assert checks["cuda_version"]["value"] == "13.0 (torch runtime)"
    facts = report["facts"]
    assert facts["gpus"]["source"].startswith("nvidia-smi")
    assert facts["gpus"]["value"]["cuda_driver_version"] == "13.0"
    assert facts["env"]["value"] == {"NCCL_DEBUG": "WARN"}  # HF_TOKEN dropped
    assert "hf_x" not in json.dumps(report)
    assert all(f["elapsed_s"] is not None for f in facts.values())
    json.dumps(report)  # env.json material: must serialise


def test_collect_asks_four_gpus_of_a_two_gpu_host(tmp_path):
    report = doctor.collect(cp=4, host=fake_nvidia_host(tmp_path, h200_outputs()))
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["gpu_count"]["status"] == "fail"
    assert checks["gpu_topology"]["status"] == "unknown"  # GPU2, GPU3 are not in the matrix
    assert doctor.exit_code(report) == 4


def test_old_nvidia_smi_without_compute_cap_is_retried(tmp_path):
    outputs = h200_outputs()
    outputs[("nvidia-smi", f"--query-gpu={probes.SMI_QUERY}")] = CommandResult(
        (), 2, 'Field "compute_cap" is not a valid field to query.\n')
    outputs[("nvidia-smi", f"--query-gpu={probes.SMI_QUERY_OLD}")] = CommandResult(
        (), 0, "0, Tesla V100-SXM2-32GB, 32510, 470.82.01, [N/A]\n")
    report = doctor.collect(cp=1, host=fake_nvidia_host(tmp_path, outputs))
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["compute_capability"]["status"] == "unknown"
    assert checks["driver_version"]["status"] == "warn"
    assert checks["gpu_count"]["status"] == "pass"


def test_nothing_available_reports_could_not_collect(tmp_path):
    host = fake_nvidia_host(tmp_path, {})
    facts = doctor.gather_facts(host)
    assert facts["gpus"].error.startswith("could not collect:")
    assert facts["gpus"].absent
    assert "nvidia-smi: command not found" in facts["topology"].error
    assert facts["torch"].error.startswith("could not collect:")
    checks = {c.name: c for c in doctor.evaluate(facts, 2)}
    assert checks["gpu_count"].status == "fail" and checks["gpu_count"].required
    assert checks["compute_capability"].status == "unknown"


def test_a_crashing_collector_becomes_could_not_collect():
    def boom(host):
        raise RuntimeError("driver exploded")

    fact = probes.isolated(boom, Host())
    assert fact.error == "could not collect: RuntimeError: driver exploded"
    assert fact.elapsed_s is not None


def test_torch_probe_reports_the_subprocess_error(tmp_path):
    line = 'CPVERIFY-TORCH {"error": "OSError: libcudart.so.13: cannot open shared object file"}'
    host = fake_nvidia_host(tmp_path, {("python-under-test",): CommandResult((), 0, line)})
    fact = probes.collect_torch(host)
    assert "libcudart.so.13" in fact.error
    crashed = fake_nvidia_host(tmp_path / "b", {("python-under-test",): CommandResult((), -11, "", "Segmentation fault")})
    assert "exited -11" in probes.collect_torch(crashed).error


def test_infiniband_devices_are_listed(tmp_path):
    (tmp_path / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    (tmp_path / "dev" / "infiniband").mkdir(parents=True)
    fact = probes.collect_infiniband(Host(root=tmp_path))
    assert fact.value == {"devices": ["mlx5_0"], "dev_infiniband": True}


def test_a_docker_folder_on_sys_path_is_not_docker_py(tmp_path, monkeypatch):
    """This repository has a docker/ folder: from its root, `import docker` may give a namespace package."""
    monkeypatch.setitem(sys.modules, "docker", types.ModuleType("docker"))
    fact = probes.collect_docker(fake_nvidia_host(tmp_path, {}))
    assert "docker-py not installed" in fact.error
    assert "docker: command not found" in fact.error


def test_docker_cli_fallback_reads_runtimes(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    info = {"ServerVersion": "26.1.4", "Runtimes": {"nvidia": {}, "runc": {}}, "DefaultRuntime": "runc",
            "DockerRootDir": "/var/lib/docker", "HttpProxy": "http://user:pw@proxy"}
    host = fake_nvidia_host(tmp_path, {("docker", "info"): CommandResult((), 0, json.dumps(info))})
    fact = probes.collect_docker(host)
    assert fact.value == {"server_version": "26.1.4", "runtimes": ["nvidia", "runc"], "default_runtime": "runc",
                          "root_dir": "/var/lib/docker"}
    check = host_checks.check_docker_gpu({"docker": fact}, 2)
    assert check.status == "pass"


# ----------------------------------------------------------------------------------------- checks


def gpu(index=0, cc="9.0", mem=143771, driver="580.159.04", mig="Disabled"):
    return {"index": index, "name": "GPU", "compute_capability": cc, "memory_mib": mem, "driver_version": driver,
            "mig_mode": mig}


def facts_with(gpus=None, **overrides) -> dict[str, Fact]:
    facts = {name: Fact(error="could not collect: not in this test") for name in
             ("host", "gpus", "torch", "nccl_log", "topology", "infiniband", "shm", "docker", "disk", "packages", "env")}
    if gpus is not None:
        facts["gpus"] = Fact({"gpus": gpus, "cuda_driver_version": "12.4"})
    facts.update(overrides)
    return facts


@pytest.mark.parametrize("gpus, check, status", [
    ([gpu(0, cc="7.0"), gpu(1)], host_checks.check_compute_capability, "fail"),
    ([gpu(0, cc="8.0"), gpu(1, cc="8.6")], host_checks.check_compute_capability, "pass"),
    ([gpu(0, driver="535.104.05"), gpu(1, driver="535.104.05")], host_checks.check_driver, "warn"),
    ([gpu(0, driver="550.54.15"), gpu(1, driver="550.54.15")], host_checks.check_driver, "pass"),
    ([gpu(0, driver="550.54.15"), gpu(1, driver="560.35.03")], host_checks.check_same_driver, "fail"),
    ([gpu(0, mig="Enabled"), gpu(1)], host_checks.check_mig, "fail"),
    ([gpu(0, mig=None), gpu(1, mig=None)], host_checks.check_mig, "pass"),
    ([gpu(0, mem=16384), gpu(1)], host_checks.check_gpu_memory, "warn"),
    ([gpu(0, mem=24564), gpu(1, mem=24564)], host_checks.check_gpu_memory, "pass"),  # a "24 GB" card
    ([gpu(0)], host_checks.check_gpu_count, "fail"),
])
def test_gpu_checks(gpus, check, status):
    assert check(facts_with(gpus), 2).status == status


def test_required_checks_decide_blocked():
    checks = doctor.evaluate(facts_with([gpu(0, cc="7.5"), gpu(1, cc="7.5")]), 2)
    assert doctor.is_blocked(checks)
    warn_only = doctor.evaluate(facts_with([gpu(0, driver="535.1"), gpu(1, driver="535.1")]), 2)
    assert not doctor.is_blocked(warn_only)
    assert {c.name: c.status for c in warn_only}["driver_version"] == "warn"


def test_cuda_and_nccl_versions():
    old = facts_with([gpu()], torch=Fact({"torch": "2.1.0", "cuda_runtime": "11.8", "nccl": "2.14.3"}))
    assert host_checks.check_cuda(old, 2).status == "warn"
    assert host_checks.check_nccl(old, 2).status == "warn"
    driver_only = facts_with([gpu()])
    assert host_checks.check_cuda(driver_only, 2).value == "12.4 (driver)"
    from_log = facts_with([gpu()], nccl_log=Fact("2.21.5+cuda12.4"))
    assert host_checks.check_nccl(from_log, 2).status == "pass"


def test_shm_and_topology_warnings():
    small = facts_with(shm=Fact({"total_bytes": 64 * 2**20, "free_bytes": 64 * 2**20}))
    check = host_checks.check_shm(small, 2)
    assert check.status == "warn" and "shm-size" in check.fix and "NCCL" in check.why
    topo = facts_with(topology=Fact(probes.parse_topo_matrix(PCIE_TOPO)))
    assert host_checks.check_topology(topo, 2).status == "pass"  # GPU0-GPU1 PIX
    assert host_checks.check_topology(topo, 4).status == "warn"  # GPU0-GPU3 SYS


def test_a_surprising_fact_shape_does_not_kill_the_report():
    weird = facts_with(gpus=None)
    weird["gpus"] = Fact({"gpus": [{"index": 0}]})  # missing every field
    checks = doctor.evaluate(weird, 2)
    assert len(checks) == len(host_checks.CHECKS)
    assert any(c.value.startswith("could not evaluate") for c in checks)


def test_render_lists_facts_checks_and_verdict(tmp_path):
    report = doctor.collect(cp=2, host=fake_nvidia_host(tmp_path, {}))
    text = doctor.render(report)
    assert "| fact" in text and "| check" in text
    assert probes.COULD_NOT_COLLECT.rstrip(": ") in text
    assert report["status"] == "blocked" and "BLOCKED" in text


# What docker-py says on a host without an engine (290 columns: the table must cite it, not repeat it).
DOCKER_DOWN = ("docker-py: Error while fetching server API version: ('Connection aborted.', "
               "FileNotFoundError(2, 'No such file or directory')); docker: command not found")


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_render_fits_the_terminal_and_cites_each_collection_error_once(tmp_path, columns):
    host = fake_nvidia_host(tmp_path, {})
    report = doctor.collect(cp=2, host=host, docker=True)
    down = probes.missing(DOCKER_DOWN, absent=True)
    check = host_checks.check_docker_gpu({"docker": down}, 2)
    report["facts"]["docker"] = down.to_json()
    report["checks"] = [dataclasses.asdict(check) if c["name"] == "docker_nvidia_runtime" else c
                        for c in report["checks"]]
    text = doctor.render(report, columns)
    assert max(map(len, text.splitlines())) <= columns, text
    assert text.count("Error while fetching server API version") == 1  # one note
    note = next(line for line in text.splitlines() if "Error while fetching" in line)
    number = note.split("]")[0] + "]"
    assert f"| docker     | could not collect {number}" in text
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| docker_nvidia_runtime"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("|  "))
    value = " ".join(line.split("|")[3].strip() for line in lines[start:end])  # the row's value, its lines joined
    assert value == check.value  # what the check found (no engine), not the collection error again
    # every check that ran and did not pass names its fix, below the table
    fixes = " ".join(text.split("to fix:\n", 1)[1].split())
    assert f"docker_nvidia_runtime: {probes.DOCKER_FIXES['not_installed']}" in fixes
    gpu_count = next(c for c in report["checks"] if c["name"] == "gpu_count")
    assert gpu_count["status"] == "fail" and f"gpu_count: {' '.join(gpu_count['fix'].split())}" in fixes


_texts = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), max_size=400)


@pytest.fixture(scope="module")
def gpu_less_report(tmp_path_factory):
    return doctor.collect(cp=2, host=fake_nvidia_host(tmp_path_factory.mktemp("host"), {}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(error=_texts, value=_texts, need=_texts, fix=_texts, word=st.text("abc/-_:", min_size=150, max_size=300))
@pytest.mark.parametrize("columns", [80, 100])
def test_render_fits_the_terminal_whatever_the_texts(gpu_less_report, error, value, need, fix, word, columns):
    """Any error, value, requirement or fix text -- including one unbreakable 300-character word --
    wraps or becomes a note: no line is wider than the terminal."""
    report = copy.deepcopy(gpu_less_report)
    report["facts"]["docker"]["error"] = f"could not collect: {error} {word}"
    report["checks"] = [{**c, "value": f"{value} {word}", "need": need, "fix": f"{fix} {word}", "status": "warn"}
                        for c in report["checks"]]
    assert max(map(len, doctor.render(report, columns).splitlines())) <= columns


# ------------------------------------------------------------------------------ on this machine


def test_doctor_runs_on_this_gpu_less_box(tmp_path):
    """No test double: the real doctor, here, where nvidia-smi and the NVIDIA driver are absent."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi; the test is about a machine without one")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    table = subprocess.run([sys.executable, "-m", "cpverify.doctor", "--json-out", str(tmp_path / "env.json")],
                           check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert table.returncode == 4, table.stderr
    facts = json.loads((tmp_path / "env.json").read_text())["facts"]
    assert facts["gpus"]["error"].startswith(probes.COULD_NOT_COLLECT)
    report = json.loads((tmp_path / "env.json").read_text())
    assert report["status"] == "blocked"
    assert report["facts"]["gpus"]["error"].startswith("could not collect")
    assert {c["name"]: c["status"] for c in report["checks"]}["gpu_count"] == "fail"


def test_json_flag_prints_one_object(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "cpverify.doctor", "--json", "--cp", "2"],
                         check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    report = json.loads(out.stdout)
    assert report["schema_version"] == 1 and report["cp"] == 2
    assert {"facts", "checks", "status"} <= report.keys()


def test_missing_nccl_log_is_a_usage_error(tmp_path):
    assert main(["doctor", "--nccl-log", str(tmp_path / "nope.log")]) == 2


def test_a_json_out_that_cannot_be_written_names_the_option_and_leaves_nothing(tmp_path, capsys):
    """--json-out goes through the one atomic writer: a failed write leaves no temporary file beside
    the target, and the fix names the option that chose the path."""
    target = tmp_path / "report"
    (target / "occupied").mkdir(parents=True)  # a directory where the file should go
    assert main(["doctor", "--json-out", str(target)]) == 4  # ArtifactWriteError: BLOCKED, as every artifact
    assert "pass --json-out to" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


# ------------------------------------------------------------------------- what the doctor prescribes

# What docker-py and the docker CLI (28.2) print on this machine with DOCKER_HOST at a socket nothing listens on,
# and with the CLI absent; the permission text is the CLI's own for a user outside the docker group.
DOCKER_TEXTS = {
    "not_running": ("docker-py: Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, "
                    "'No such file or directory')); docker exited 1: Cannot connect to the Docker daemon at "
                    "unix:///var/run/docker.sock. Is the docker daemon running?", False),
    "not_installed": (DOCKER_DOWN, True),
    "permission": ("docker-py: Error while fetching server API version: ('Connection aborted.', PermissionError(13, "
                   "'Permission denied')); docker exited 1: permission denied while trying to connect to the Docker "
                   "daemon socket at unix:///var/run/docker.sock", False),
}


@pytest.mark.parametrize("cause", DOCKER_TEXTS)
@pytest.mark.parametrize("required", [True, False])
def test_an_engine_that_does_not_answer_gets_the_fix_for_its_cause(cause, required):
    text, absent = DOCKER_TEXTS[cause]
    check = host_checks.check_docker_gpu({"docker": probes.missing(text, absent=absent)}, 2, required=required)
    assert (check.status, check.required, check.fix) == ("fail" if required else "warn", required,
                                                         probes.DOCKER_FIXES[cause])


def test_the_docker_check_is_asked_only_of_runners_that_use_docker(tmp_path, capsys):
    names = {}
    for runner in ("docker", "local"):
        main(["doctor", "--json", "--runner", runner, "--json-out", str(tmp_path / f"{runner}.json")])
        capsys.readouterr()
        names[runner] = {c["name"] for c in json.loads((tmp_path / f"{runner}.json").read_text())["checks"]}
    assert names["docker"] - names["local"] == {"docker_nvidia_runtime"}


@pytest.fixture(scope="module")
def h200_facts(tmp_path_factory):
    facts = doctor.gather_facts(fake_nvidia_host(tmp_path_factory.mktemp("h200"), h200_outputs()),
                                nccl_log=DATA / "h200x2-nccl-info.log")
    facts["docker"] = Fact({"server_version": "26.1.4", "runtimes": ["runc"], "default_runtime": "runc",
                            "root_dir": "/var/lib/docker"})
    return facts


@settings(max_examples=80, deadline=None)
@given(lost=st.sets(st.sampled_from(("gpus", "torch", "nccl_log", "topology", "shm", "docker", "disk"))),
       absent=st.booleans(), cp=st.integers(1, 8))
def test_only_checks_that_ran_and_did_not_pass_prescribe_a_fix(h200_facts, lost, absent, cp):
    """A check that could not run (its fact was not collected) has no fix: a missing GPU must not
    read as 'upgrade the driver, disable MIG, ...'. One that ran and did not pass names its fix."""
    facts = {name: probes.missing("gone in this example", absent=absent) if name in lost else fact
             for name, fact in h200_facts.items()}
    checks = [*doctor.evaluate(facts, cp), host_checks.check_docker_gpu(facts, cp)]
    assert [c.name for c in checks if c.status == "unknown" and c.fix] == []
    assert [c.name for c in checks if c.status in ("fail", "warn") and not c.fix] == []
