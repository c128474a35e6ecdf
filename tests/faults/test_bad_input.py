"""Bad input and a bad environment, through `cpverify run` as users call it: each ends with a
clear error naming the problem and the fix, the documented exit code (cpverify/errors.py:
2 bad input, 1 lint errors, 4 BLOCKED), no workload started, and nothing half-written.

Real where the thing can exist here: files, a pinned Hugging Face cache, a full or read-only
filesystem (tmpfs), a small /dev/shm (a private mount namespace), a dead or forbidden Docker
socket, an engine without the NVIDIA runtime. GPUs cannot exist here: where a test needs the
host to *have* GPUs, a stand-in `nvidia-smi` prints a recorded 2x H200 answer
(tests/data/doctor), which is all the doctor reads when NVML is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpverify.profiles import SMOKE_TRAIN_ARGS
from faults.harness import PROFILE, ROOT
from helpers.hfcache import QWEN_CONFIG, make_model_cache
from helpers.nobody import as_nobody, public_dir

SNAPSHOT = Path("hf") / f"models--{PROFILE.model_repo.replace('/', '--')}" / "snapshots" / PROFILE.model_revision
SHARED_FILES = {"verdict.md", "verdict.json", "env.json", "commands.sh"}


def assert_stopped_before_any_arm(outcome, *, code: int, problem: str, fix: str) -> None:
    """The exit code, the problem and the fix in the message, no traceback, no arm started,
    no verdict bundle, and no temporary file left behind."""
    assert outcome.code == code, outcome.stderr[-3000:]
    assert "Traceback" not in outcome.stderr
    assert problem in outcome.stderr, outcome.stderr[-3000:]
    assert "fix:" in outcome.stderr and fix in outcome.stderr, outcome.stderr[-3000:]
    names = {p.name for p in outcome.run_dir.rglob("*")} if outcome.run_dir.exists() else set()
    assert not names & (SHARED_FILES | {"cp1.log", "cp2.log"}), names
    assert not [n for n in names if n.endswith(".tmp")], names


# -- the prompt dataset ---------------------------------------------------------------------------

LINE = '{"messages": [{"role": "user", "content": "Count to three."}]}'

DATASETS = {
    "missing": (None, "does not exist", "check the path"),
    "empty": ("", "holds no prompts", "write one JSON object per line"),
    "invalid JSON on line 3": (f"{LINE}\n{LINE}\n{{\"messages\": [\n", "cp.jsonl:3: invalid JSON",
                               "each line must be one complete JSON object"),
    "no messages": (f'{LINE}\n{{"prompt": "Count to three."}}\n', "cp.jsonl:2: no `messages` field (fields: prompt)",
                    "--input-key messages"),
    "wrong role": ('{"messages": [{"role": "human", "content": "hi"}]}\n', "cp.jsonl:1: messages[0] has role 'human'",
                   "use one of system, user, assistant"),
    "not UTF-8": (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n', "cp.jsonl:1: not UTF-8 text",
                  "save the file as UTF-8"),
}


@pytest.mark.parametrize("case", list(DATASETS))
def test_bad_dataset(local_ws, rid, case):
    content, problem, fix = DATASETS[case]
    path = local_ws.root / "cp.jsonl"
    if content is not None:
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    outcome = local_ws.run(rid, "--set", f"dataset={path}", only="fetch,lint,cp1,verdict")
    assert_stopped_before_any_arm(outcome, code=2, problem=problem, fix=fix)
    assert not (local_ws.cache / "data").exists() or not any((local_ws.cache / "data").iterdir())


def test_a_100_mb_line_is_refused_without_being_read(local_ws, rid):
    """Refused at the 1 MiB cap: the process never holds the line (peak memory stays far below it)."""
    path = local_ws.root / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"messages": [{"role": "user", "content": "')
        f.writelines(b"a" * (1 << 20) for _ in range(100))
        f.write(b'"}]}\n')
    # VmHWM: this process's own peak (getrusage's maxrss would include the parent's, from before exec)
    probe = ("import re, sys\nfrom cpverify.cli import main\ncode = main(sys.argv[1:])\n"
             "status = open('/proc/self/status').read()\n"
             "print('peak_rss_kb', re.search(r'VmHWM:\\s+(\\d+)', status).group(1), file=sys.stderr)\n"
             "sys.exit(code)\n")
    argv = [sys.executable, "-c", probe, *local_ws.argv(rid, "--set", f"dataset={path}", only="fetch,cp1")[3:]]
    proc = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "huge.jsonl:1: line is longer than 1048576 bytes" in proc.stderr and "it is not read" in proc.stderr
    peak_kb = int(proc.stderr.rsplit("peak_rss_kb", 1)[1].split()[0])
    assert peak_kb < 100 * 1024, f"peak memory {peak_kb} KiB: the line was loaded"
    assert not (local_ws.out / rid / "logs" / "cp1.log").exists()


# -- the model ------------------------------------------------------------------------------------


def _blob(local_ws, name: str) -> Path:
    return (local_ws.cache / SNAPSHOT / name).resolve()


def test_missing_model_directory(local_ws, rid):
    outcome = local_ws.run(rid, "--model-dir", str(local_ws.root / "no-such-model"), only="fetch,lint,cp1,verdict")
    assert_stopped_before_any_arm(outcome, code=2, problem="no-such-model does not exist or is not a directory",
                                  fix="leave --model-dir out to fetch")


def test_model_not_in_the_cache_and_no_network(local_ws, rid):
    shutil.rmtree(local_ws.cache / "hf")
    outcome = local_ws.run(rid, only="fetch,lint,cp1,verdict")
    assert_stopped_before_any_arm(outcome, code=2, problem="is not in the cache", fix="run `cpverify fetch` once")


@pytest.mark.parametrize("damage", ["file missing", "weights truncated", "config corrupted"])
def test_partial_snapshot_is_caught_against_the_pinned_hashes(local_ws, rid, damage):
    """huggingface_hub names each blob after its hash at the pinned revision: re-hashing catches
    a short or altered download without any network."""
    if damage == "file missing":
        (local_ws.cache / SNAPSHOT / "tokenizer_config.json").unlink()
        problem = "missing tokenizer_config.json"
    elif damage == "weights truncated":
        blob = _blob(local_ws, "model.safetensors")
        os.truncate(blob, blob.stat().st_size // 2)
        problem = "model.safetensors is truncated or corrupted (checksum"
    else:
        blob = _blob(local_ws, "config.json")
        blob.write_bytes(blob.read_bytes().replace(b"896", b"897"))
        problem = "config.json is truncated or corrupted (checksum"
    outcome = local_ws.run(rid, only="fetch,lint,cp1,verdict")
    assert_stopped_before_any_arm(outcome, code=2, problem=problem, fix="run `cpverify fetch` again")


def test_wrong_model_for_the_profiles_model_args(local_ws, rid):
    """A whole, valid snapshot of another model: its config.json disagrees with MODEL_ARGS."""
    shutil.rmtree(local_ws.cache / "hf")
    make_model_cache(local_ws.cache / "hf", PROFILE.model_repo, PROFILE.model_revision,
                     config={**QWEN_CONFIG, "hidden_size": 1536, "num_hidden_layers": 28})
    outcome = local_ws.run(rid, only="fetch,lint,cp1,verdict")
    assert_stopped_before_any_arm(outcome, code=2, problem="config.json hidden_size=1536 but MODEL_ARGS has --hidden-size 896",
                                  fix="use the profile's model")
    assert "num_hidden_layers=28 but MODEL_ARGS has --num-layers 24" in outcome.stderr


# -- arguments -------------------------------------------------------------------------------------


def _with(args: tuple[str, ...], flag: str, value: str | None = None, *, rename: str | None = None,
          drop: bool = False) -> list[str]:
    """SMOKE_TRAIN_ARGS with one flag's value changed, renamed or dropped (with its value)."""
    out, i = [], 0
    while i < len(args):
        word, has_value = args[i], i + 1 < len(args) and not args[i + 1].startswith("--")
        if word == flag:
            if not drop:
                out.append(rename or word)
                if has_value:
                    out.append(value if value is not None else args[i + 1])
            i += 2 if has_value else 1
            continue
        out.append(word)
        i += 1
    return out


# The seeds' mistakes and slime's start-up assertions, each a lint error before any GPU is held:
# (train_args, env override or None, the flag named, words of the fix)
LINT_ERRORS = {
    "--rollout-num typo": (_with(SMOKE_TRAIN_ARGS, "--num-rollout", rename="--rollout-num"), None,
                           "--rollout-num", f"--num-rollout {SMOKE_TRAIN_ARGS[SMOKE_TRAIN_ARGS.index('--num-rollout') + 1]}"),
    "rollout smaller than the global batch": (_with(SMOKE_TRAIN_ARGS, "--n-samples-per-prompt", "1"), None,
                                              "--global-batch-size", "--n-samples-per-prompt 4"),
    "no CUDA_DEVICE_MAX_CONNECTIONS": (list(SMOKE_TRAIN_ARGS), {"CUDA_DEVICE_MAX_CONNECTIONS": "8"},
                                       "CUDA_DEVICE_MAX_CONNECTIONS", "export CUDA_DEVICE_MAX_CONNECTIONS=1"),
    "no reward": (_with(SMOKE_TRAIN_ARGS, "--custom-rm-path", drop=True), None, "--rm-type or --custom-rm-path",
                  "--rm-type <type> for labelled data"),
    "dynamic batch without a token budget": (_with(SMOKE_TRAIN_ARGS, "--max-tokens-per-gpu", drop=True), None,
                                             "--use-dynamic-batch-size", "--max-tokens-per-gpu 2048"),
    "misspelled flag": (_with(SMOKE_TRAIN_ARGS, "--rollout-batch-size", rename="--rollout-batch-sise"), None,
                        "--rollout-batch-sise", "did you mean --rollout-batch-size?"),
    "underscored flag": (_with(SMOKE_TRAIN_ARGS, "--global-batch-size", rename="--global_batch_size"), None,
                         "--global_batch_size", "--global-batch-size 8"),
    "removed backend": (_with(SMOKE_TRAIN_ARGS, "--train-backend", "fsdp"), None, "--train-backend",
                        "--train-backend megatron"),
    "reward path not dotted": (_with(SMOKE_TRAIN_ARGS, "--custom-rm-path", "length_reward"), None,
                               "--custom-rm-path", "--custom-rm-path package.module.function"),
    "both KL coefficients": ([*SMOKE_TRAIN_ARGS, "--kl-coef", "0.1", "--kl-loss-coef", "0.1"], None, "--kl-coef",
                             "set one of --kl-coef / --kl-loss-coef to 0"),
    "save interval without a save path": ([*SMOKE_TRAIN_ARGS, "--save-interval", "10"], None, "--save-interval",
                                          "--save /path/to/checkpoints"),
    "sequence not a multiple of 2 x CP": ([*SMOKE_TRAIN_ARGS, "--seq-length", "4095"], None, "--seq-length",
                                          "--seq-length 4096"),
}


@pytest.mark.parametrize("case", list(LINT_ERRORS))
def test_lint_error_stops_the_run_before_any_gpu_is_held(local_ws, rid, case):
    train_args, env, flag, fix = LINT_ERRORS[case]
    outcome = local_ws.run(rid, only="lint,cp1,cp2,verdict", train_args=train_args,
                           fake_env=env or {})
    assert outcome.code == 1, outcome.stderr[-3000:]
    assert "lint:" in outcome.stderr and "fix them before any GPU is held" in outcome.stderr
    assert flag in outcome.stderr and fix in outcome.stderr, outcome.stderr[-3000:]
    assert "Traceback" not in outcome.stderr
    assert not (outcome.run_dir / "logs" / "cp1.log").exists() and not local_ws.emitted(rid)
    assert not SHARED_FILES & {p.name for p in outcome.run_dir.iterdir()}
    recorded = outcome.state()["lint"]
    assert any(f["flag"] == flag and f["severity"] == "error" for f in recorded)


USAGE_ERRORS = {
    "unknown profile": (["--profile", "smokey"], "unknown profile 'smokey'", "use one of: smoke, long, train-only, probe"),
    "CP larger than the GPUs": (["--set", "cp_sizes=1,4"], "cp sizes [4] do not divide gpus=2",
                                "fix the override"),
    "CP larger than the GPUs (--cp)": (["--cp", "1,2,8"], "cp sizes [8] do not divide gpus=2", "fix the override"),
    "the same GPU twice": (["--gpus", "0,0"], "the GPUs given are [0, 0]", "pass 2 distinct GPU indices"),
    "GPU 0 as a count": (["--gpus", "0"], "--gpus 0 is a count of GPUs and runs nothing", "indices: --gpus 0,1"),
    "a negative GPU index": (["--gpus", "1,-1"], "a GPU index is 0 or more", "e.g. --gpus 0,1"),
    "more GPUs than the profile": (["--gpus", "3"], "runs on 2 GPUs, but the GPUs given are [0, 1, 2]",
                                   "pass 2 distinct GPU indices"),
    "GPUs that are not numbers": (["--gpus", "first,second"], "is neither a count nor a list of indices",
                                  "write --gpus 2 or --gpus 0,1"),
    "ray runner without an address": (["--runner", "ray"], "--runner ray needs --ray-address",
                                      "--ray-address http://HEAD:8265"),
    "sequence lengths for a slime profile": (["--seq-len", "8K"], "--seq-len applies to the probe and train-only profiles, not 'smoke'",
                                             "use --profile train-only"),
    "unknown profile field": (["--set", "num_rollout=16"], "unknown profile field(s): num_rollout", "use one of:"),
    "field of the wrong type": (["--set", "hang_s=soon"], "override hang_s='soon' does not fit the field",
                                "give hang_s a value like"),
    "unknown step": (["--only", "cp3"], "unknown step 'cp3'", "choose from doctor, image"),
    "a count of GPUs that overflows": (["--gpus", "99999999999999999999"], "is more GPUs than one node has (at most 64)",
                                       "e.g. --gpus 2"),
    "a profile of 10^8 GPUs": (["--set", "gpus=100000000"], "gpus must be 1 to 64 (the GPUs of one node)",
                               "fix the override"),
    "env name that is a command": (["--set", "env=X;touch PWNED;Y=1"], "env names ['X;touch PWNED;Y'] are not "
                                   "variable names", "fix the override"),
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_conflicting_or_impossible_options(local_ws, rid, case):
    extra, problem, fix = USAGE_ERRORS[case]
    argv = local_ws.argv(rid, only="lint,cp1,verdict")
    if "--gpus" in extra or "--runner" in extra:  # replace the harness's own value
        flag = "--gpus" if "--gpus" in extra else "--runner"
        i = argv.index(flag)
        del argv[i : i + 2]
    if "--only" in extra:
        i = argv.index("--only")
        del argv[i : i + 2]
    proc = subprocess.run([*argv, *extra], capture_output=True, text=True, env=local_ws.env(), cwd=ROOT,
                          timeout=60, check=False)
    outcome = type("Outcome", (), {"code": proc.returncode, "stderr": proc.stderr, "run_dir": local_ws.out / rid})
    assert_stopped_before_any_arm(outcome, code=2, problem=problem, fix=fix)


BAD_RUN_IDS = {"parent": "../../escaped", "absolute": "{root}/escaped-absolute", "dot-dot": "..",
               "newline": "x\ntouch PWNED", "too long": "r" * 65, "not UTF-8": b"run-\xff"}


@pytest.mark.parametrize("via", ["--run-id", "CPVERIFY_RUN_ID"])
@pytest.mark.parametrize("case", list(BAD_RUN_IDS))
def test_a_run_id_that_is_not_a_name_is_refused(local_ws, rid, via, case):
    """A run id names a directory under --out (and words of commands.sh): a path, a newline or
    undecodable bytes are refused before anything is written, from the flag and the variable alike."""
    bad = BAD_RUN_IDS[case]
    bad = bad.format(root=local_ws.root) if isinstance(bad, str) else bad
    argv = local_ws.argv(rid, only="lint,cp1,verdict")
    i = argv.index("--run-id")
    env = local_ws.env()
    if via == "--run-id":
        argv[i + 1] = bad
    else:
        del argv[i : i + 2]
        env = {**{k.encode(): v.encode() for k, v in env.items()}, b"CPVERIFY_RUN_ID": os.fsencode(bad)}
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, timeout=60, check=False)
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr and "is not a name: use letters, digits" in stderr
    assert "fix: pass e.g. --run-id" in stderr
    assert not local_ws.out.exists() and not (local_ws.root.parent / "escaped").exists()
    assert not (local_ws.root / "escaped-absolute").exists() and not (local_ws.root / "PWNED").exists()
    assert not local_ws.emitted(rid)


SLIME_DIRS = {
    "missing": (lambda root: root / "no-such-slime", "no-such-slime does not exist or is not a directory"),
    "a file": (lambda root: root / "a-file", "a-file does not exist or is not a directory"),
    "no train.py": (lambda root: root / "not-slime", "not-slime has no train.py, so it is not a slime checkout"),
}


@pytest.mark.parametrize("case", list(SLIME_DIRS))
def test_a_slime_dir_that_is_not_a_slime_checkout(local_ws, rid, case):
    """Bad input before any GPU, whatever the steps: not a traceback in compileall, not a FAIL after it."""
    make, problem = SLIME_DIRS[case]
    (local_ws.root / "a-file").write_text("")
    (local_ws.root / "not-slime" / "slime" / "backends" / "megatron_utils").mkdir(parents=True)
    argv = local_ws.argv(rid, only="compileall,lint,cp1,verdict")
    argv[argv.index("--slime-dir") + 1] = str(make(local_ws.root))
    proc = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=60, check=False)
    outcome = type("Outcome", (), {"code": proc.returncode, "stderr": proc.stderr, "run_dir": local_ws.out / rid})
    assert_stopped_before_any_arm(outcome, code=2, problem=problem, fix="pass the top directory of a slime clone")


CONFIGS = {
    "a profile key": (b'profile = "probe"\n', "sets profile = 'probe', which is not a field",
                      "delete that line and pass --profile probe"),
    "Latin-1": ("pass_ratio = 1.5  # café\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9",
                "iconv -f LATIN1 -t UTF-8"),
    "a directory": (None, "is a directory, not a file", "pass the path of a file inside it"),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_config_file_that_cannot_be_read(local_ws, rid, case):
    content, problem, fix = CONFIGS[case]
    path = local_ws.root / "overrides.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    argv = local_ws.argv(rid, only="lint,cp1,verdict")
    argv[argv.index("--config") + 1] = str(path)
    proc = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=60, check=False)
    outcome = type("Outcome", (), {"code": proc.returncode, "stderr": proc.stderr, "run_dir": local_ws.out / rid})
    assert_stopped_before_any_arm(outcome, code=2, problem=f"override file {path} {problem}", fix=fix)


def _without_gpus_none(argv: list[str], gpus: str | None) -> list[str]:
    i = argv.index("--gpus")
    return argv[:i] + (["--gpus", gpus] if gpus else []) + argv[i + 2 :]


@pytest.mark.parametrize(("gpus", "assignments", "problem"), [
    ("0,7", [], "GPU 7 of the plan does not exist on this host (it has GPUs 0, 1)"),
    (None, ["--set", "gpus=4", "--set", "cp_sizes=1,4"], "GPU 2, 3 of the plan does not exist on this host"),
])
def test_gpus_this_host_does_not_have_block_the_run(local_ws, rid, two_gpu_host, gpus, assignments, problem):
    argv = _without_gpus_none(local_ws.argv(rid, *assignments, only="doctor,lint,cp1,verdict"), gpus)
    proc = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(two_gpu_host), cwd=ROOT,
                          timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr[-3000:]
    verdict = json.loads((local_ws.out / rid / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED" and problem in verdict["headline"]
    assert not (local_ws.out / rid / "logs" / "cp1.log").exists() and not local_ws.emitted(rid)


def test_no_gpu_at_all_blocks_the_run(local_ws, rid):
    """This machine really has no GPU: asking for two is BLOCKED, with a verdict that says why."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    argv = _without_gpus_none(local_ws.argv(rid, only="doctor,lint,cp1,verdict"), "0,1")
    proc = subprocess.run(argv, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr[-3000:]
    verdict = json.loads((local_ws.out / rid / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED" and "doctor: gpu_count: 0" in verdict["headline"]
    assert any("install the NVIDIA driver" in c["fix"] for c in verdict["checks"])
    assert not (local_ws.out / rid / "logs" / "cp1.log").exists()


# -- the environment -------------------------------------------------------------------------------


def test_docker_daemon_down(tmp_path, rid):
    from faults.harness import Workspace

    ws = Workspace(tmp_path, "docker", image="cpverify-slime:test")
    outcome = ws.run(rid, env={"DOCKER_HOST": f"unix://{tmp_path}/no-dockerd.sock"})
    assert_stopped_before_any_arm(outcome, code=4, problem=f"no Docker engine answers at unix://{tmp_path}/no-dockerd.sock",
                                  fix="start dockerd")


@pytest.mark.docker
def test_docker_socket_permission_denied(rid):
    """A real EACCES on the real socket: cpverify imports as root, then runs as `nobody`."""
    sock = "/var/run/docker.sock"
    if os.geteuid() != 0 or not os.path.exists(sock) or os.stat(sock).st_mode & 0o006:
        pytest.skip("needs root to drop privileges, and a socket that others may not use")
    with public_dir() as public:
        from faults.harness import Workspace

        ws = Workspace(public, "docker", image="cpverify-slime:test")
        args = ws.argv(rid)[3:]  # writes the run's config and directories, which nobody must then write to
        for directory in [public, *public.rglob("*")]:  # what the harness made as root, `nobody` may write
            if directory.is_dir():
                directory.chmod(0o777)
        proc = as_nobody("import sys, tomllib, encodings.utf_8_sig, cpverify.cli, cpverify.verdict.ab, cpverify.runners.docker, "
                         "rich.console, tabulate, docker\n"
                         "cpverify.cli.build_parser()  # every module it needs, imported while they are readable",
                         "sys.exit(cpverify.cli.main(sys.argv[1:]))", *args,
                         env=ws.env({"DOCKER_HOST": f"unix://{sock}"}), cwd=ROOT, timeout=120)
        outcome = type("Outcome", (), {"code": proc.returncode, "stderr": proc.stderr, "run_dir": ws.out / rid})
        assert_stopped_before_any_arm(outcome, code=4, problem=f"permission denied on the Docker socket (unix://{sock})",
                                      fix="usermod -aG docker")


@pytest.mark.docker
def test_no_nvidia_runtime_is_blocked_and_leaves_no_container(tmp_path, rid, cpverify_image, docker_client):
    from faults.harness import Workspace

    ws = Workspace(tmp_path, "docker", image=cpverify_image[0], docker_client=docker_client)
    argv = _without_gpus_none(ws.argv(rid), "0,1")
    proc = subprocess.run(argv, capture_output=True, text=True, env=ws.env(), cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 4, proc.stderr[-3000:]
    verdict = json.loads((ws.out / rid / "verdict.json").read_text())
    assert verdict["status"] == "BLOCKED"
    assert 'could not select device driver "" with capabilities: [[gpu]]' in verdict["headline"]
    assert any("nvidia-ctk runtime configure" in c["fix"] for c in verdict["checks"])
    ws.assert_nothing_left(rid)
    assert not ws.emitted(rid)


def test_too_little_dev_shm(local_ws, rid):
    """/dev/shm of 1 MB (a private mount namespace; the host's is untouched): the doctor warns with
    the fix, NCCL's shared-memory set-up fails in the arm, the verdict names it and the fix."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to give one process tree its own small /dev/shm")
    argv = local_ws.argv(rid, only="doctor,lint,cp1,verdict", fake_env={"FAKE_SLIME_SHM_BYTES": str(64 << 20)})
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$@"', "sh", *argv]
    proc = subprocess.run(wrapped, capture_output=True, text=True, env=local_ws.env(), cwd=ROOT, timeout=120,
                          check=False)
    if "mount" in proc.stderr and "permission denied" in proc.stderr.lower():
        pytest.skip(f"mounting is not permitted here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    state = json.loads((local_ws.out / rid / "state.json").read_text())
    shm = next(c for c in state["doctor"]["checks"] if c["name"] == "dev_shm")
    assert shm["status"] == "warn" and shm["value"] == "1.0 MB" and "--shm-size=16g" in shm["fix"]
    verdict = json.loads((local_ws.out / rid / "verdict.json").read_text())
    assert verdict["status"] == "FAIL"
    check = next(c for c in verdict["checks"] if c["name"] == "error:nccl_shm_failure")
    assert "Error while creating shared memory segment" in check["detail"] and "--shm-size=16g" in check["fix"]
    local_ws.assert_nothing_left(rid)
    emitted = local_ws.emitted(rid)
    assert (local_ws.out / rid / "logs" / "cp1.log").read_text().splitlines()[: len(emitted)] == emitted


def test_disk_full_while_writing_the_verdict(local_ws, rid, small_fs):
    """96 KiB: the logs (and plan.json, state.json) fit, the bundle does not. The error names the file
    and the fix; what was written is whole (atomic writes), verdict.md (written last) is absent, no
    temp file is left."""
    local_ws.out = small_fs("full", "96k")
    # one round per arm: the logs of more rounds would not fit, and a log that does not fit is another test
    outcome = local_ws.run(rid, "--rounds", "1", only="lint,cp1,cp2,verdict")
    assert outcome.code == 4, outcome.stderr[-3000:]
    assert f"could not write {local_ws.out / rid}/" in outcome.stderr, outcome.stderr[-1500:]
    assert "No space left on device" in outcome.stderr and "free disk space" in outcome.stderr
    names = {p.name for p in (local_ws.out / rid).iterdir()}
    assert "verdict.md" not in names and not [n for n in names if n.endswith(".tmp")], names
    for name in names & {"verdict.json", "env.json", "state.json"}:
        json.loads((local_ws.out / rid / name).read_text())  # whole, or not there at all
    for arm, cp in (("cp1", 1), ("cp2", 2)):
        emitted = local_ws.emitted(rid, cp)
        assert (local_ws.out / rid / "logs" / f"{arm}.log").read_text().splitlines() == emitted
    local_ws.assert_nothing_left(rid)


@pytest.mark.parametrize("existing", [False, True], ids=["new run", "resumed run"])
def test_read_only_artifacts_directory(local_ws, rid, small_fs, existing):
    """As root chmod stops nothing: a read-only tmpfs does."""
    out = small_fs("ro", "1m")
    if existing:
        (out / rid / "logs").mkdir(parents=True)
    subprocess.run(["mount", "-o", "remount,ro", str(out)], check=True)
    local_ws.out = out
    outcome = local_ws.run(rid, only="fetch,lint,cp1,verdict")
    # a resumed run's first write is the lock that makes the run directory its own
    what = f"could not write {out / rid / '.lock'}" if existing else f"could not create {out / rid / 'logs'}"
    assert_stopped_before_any_arm(outcome, code=4, problem=f"{what}: Read-only file system",
                                  fix="pass --out to a writable directory")
    assert not local_ws.emitted(rid)
