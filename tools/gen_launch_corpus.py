"""Regenerate tests/data/slime-launch-scripts.json: every launch script of slime at a commit, run
by bash as a user runs it, with the command line that reaches train.py recorded.

Reading a launch script as text misses what bash does to it (arrays, `source scripts/models/*.sh`,
`${VAR:-default}`, `$((...))`, loops that build `--moe-layer-freq`, JSON built by a heredoc), so
this runs each script for real with the programs that would start work stubbed on PATH: `ray`
(`ray job submit ... -- python3 train.py ...` is recorded), `python`/`python3` (a train.py or
train_async.py command is recorded; `python3 -c`/`python3 -` snippets run for real: scripts build
their runtime-env JSON with them), `nvidia-smi` (8 GPUs, all NVLink-connected), and every command
that would act on the machine, the network or the clock (pkill, sleep, ssh, curl, pip, hf, date,
mktemp, hostname, ps, rm, ...). Each script runs from the root of a `git archive` of the commit, as
slime's docs run them (`bash scripts/run-qwen3-4B.sh`), in an empty environment but for PATH,
HOME, TMPDIR in a scratch directory and the variables some scripts tell users to set (USER_ENV).
slime's image holds slime at /root/slime, where some scripts source their model file from: that
path is read from the archive (and `mkdir` acts only inside the archive and the scratch directory).

Python launchers (examples/*/run_*.py, which build the command with slime's
`slime.utils.external_utils.command_utils.execute_train`) run for real too, with the archive on
sys.path and empty stand-ins for the third-party modules this machine lacks (torch, ...): slime's
own code builds the command, bash runs it, the stubs record it.

Recorded per script, with the archive's path written /root/slime and HOME /root, as in slime's
image: its exit status (and stderr's tail when it failed: a script that does not run
as committed is a finding too), the model files it sourced from a path that does not exist (read
from scripts/models/ by name instead), and per train command the argv (from `ray`/`python3` on) and
the variables the script exported (secret-named ones masked). tests/test_lint.py lints every one.
When slime's pin moves (cpverify/data/known_flags.txt names it), fetch slime and run

    python tools/gen_launch_corpus.py --slime /path/to/slime --commit <sha> > tests/data/slime-launch-scripts.json

then `pytest tests/test_lint.py -k launch_script`: a new error is either a lint bug or a bug of
that script (then list it in the test with the reason, and tell slime).
"""

from __future__ import annotations

import argparse
import json
import re
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's cpverify

from cpverify.redact import is_secret_name, secret_arguments

TRAIN_SCRIPTS = ("train.py", "train_async.py")
GPUS = 8
SCRIPT_TIMEOUT_S = 120
# What users are told to set before some scripts (`MASTER_ADDR is not set. Please set it ...`).
USER_ENV = {"MASTER_ADDR": "10.0.0.1", "BASE_DIR": "/root", "BASE_FOLDER": "/root"}

# Commands that would act on the machine, the network or the clock: each prints what a script
# reads from it (nvidia-smi's GPU list and topology, `ps`'s ray dashboard, `pip list`'s
# megatron-core), the same every time, or nothing; and succeeds.
_TOPOLOGY = "\t" + "\t".join(f"GPU{j}" for j in range(GPUS)) + "\n" + "".join(
    f"GPU{i}\t" + "\t".join("X" if i == j else "NV18" for j in range(GPUS)) + "\n" for i in range(GPUS))
CANNED_OUTPUT = {
    "nvidia-smi -L": "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d})\n" for i in range(GPUS)),
    "nvidia-smi topo": _TOPOLOGY,
    "nvidia-smi": "",
    "ps": "root 1 0.0 python -m ray.dashboard --node-ip-address=10.0.0.1 --dashboard-port=8265\n",
    "pip list": "megatron-core 0.13.0 /root/Megatron-LM\n",
    "pip": "",
    "hostname": "10.0.0.1\n",
    "date": "20250101_000000\n",
    "mktemp": "/tmp/corpus.tmp\n",
    "curl": "{}\n",
}
SILENT = ("pkill", "pgrep", "killall", "kill", "sleep", "ssh", "scp", "rsync", "wget", "git", "hf", "huggingface-cli",
          "docker", "mpirun", "torchrun", "rm", "cp", "mv", "ln", "touch", "chmod", "chown", "tar", "dd", "tmux",
          "screen", "sudo", "apt", "apt-get", "pip3", "uv", "nc")

# Read by every non-interactive bash (BASH_ENV): `source`/`.` of /root/slime/... read the archive;
# a model file sourced from a path that does not exist is read from scripts/models/ by its name.
BASH_ENV_TEXT = r'''
_corpus_source() {
    local path="$1"; shift
    case "$path" in /root/slime/*) path="$CORPUS_SLIME_ROOT/${path#/root/slime/}" ;; esac
    local by_name="$CORPUS_SLIME_ROOT/scripts/models/$(basename -- "$path")"
    if [ ! -e "$path" ] && [ -e "$by_name" ]; then
        printf '%s\n' "${path#$CORPUS_SLIME_ROOT/}" >> "$CORPUS_MISSING_SOURCES"
        path="$by_name"
    fi
    builtin source "$path" "$@"
}
source() { _corpus_source "$@"; }
.() { _corpus_source "$@"; }
'''

STUB = r'''#!__PYTHON__
import json, os, sys
name, args = os.path.basename(sys.argv[0]), sys.argv[1:]
if name in ("python", "python3") and args[:1] in (["-c"], ["-"]):
    os.execv(os.environ["CORPUS_REAL_PYTHON"], ["python3", *args])  # a snippet that computes something
if name in ("python", "python3", "ray") and any(os.path.basename(a) in __TRAINS__ for a in args):
    base = set(os.environ["CORPUS_BASE_ENV"].split(","))
    env = {k: v for k, v in os.environ.items() if k not in base and not k.startswith("CORPUS_")}
    with open(os.environ["CORPUS_RECORD"], "a") as f:
        f.write(json.dumps({"argv": [name, *args], "env": env}) + "\n")
if name == "mkdir":  # only inside the archive and the scratch directory
    roots = os.environ["CORPUS_ROOTS"].split(":")
    inside = [a for a in args if a.startswith("-") or any(os.path.abspath(a).startswith(r) for r in roots)]
    os.execv("/bin/mkdir", ["mkdir", *inside]) if any(not a.startswith("-") for a in inside) else sys.exit(0)
canned = __CANNED__
for key in (f"{name} {args[0]}" if args else None, name):
    if key in canned:
        sys.stdout.write(canned[key])
        break
'''

# What a Python launcher imports that this machine may lack: an empty stand-in, so that slime's
# own code (command_utils.execute_train) runs and builds the command. What it downloads into /root
# first (`hf download`, stubbed) is taken to be there.
IMPORT_SHIM = r'''
import importlib.abc, importlib.machinery, importlib.util, sys, types

class _Stand(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stand(f"{self.__name__}.{name}")
    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else _Stand("call")
    def __or__(self, other):
        return self
    __ror__ = __or__
    def __getitem__(self, key):
        return self
    def __mro_entries__(self, bases):
        return (object,)

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in ("slime", "slime_plugins", "examples") or top in sys.stdlib_module_names:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec") and finder.find_spec(name, path, target):
                return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return _Stand(spec.name)
    def exec_module(self, module):
        pass

sys.meta_path.append(_Finder())

# What a launcher downloads into /root (models, data sets: `hf download` is stubbed) is there.
import os.path
_exists = os.path.exists
os.path.exists = lambda path: str(path).startswith("/root/") or _exists(path)
'''


def write_scratch(scratch: Path, root: Path) -> dict[str, str]:
    """The stubs, BASH_ENV and the import shim; the environment every script runs in."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "_stub"
    stub.write_text(STUB.replace("__PYTHON__", sys.executable).replace("__TRAINS__", repr(TRAIN_SCRIPTS))
                    .replace("__CANNED__", repr(CANNED_OUTPUT)))
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    for name in {*SILENT, *(key.split()[0] for key in CANNED_OUTPUT), "ray", "python", "python3", "mkdir"}:
        (bin_dir / name).symlink_to("_stub")
    (scratch / "bash_env.sh").write_text(BASH_ENV_TEXT)
    (scratch / "shim.py").write_text(IMPORT_SHIM)
    home = scratch / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8", **USER_ENV}
    env["CORPUS_BASE_ENV"] = ",".join([*env, "PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV"])
    return {
        **env,
        "BASH_ENV": str(scratch / "bash_env.sh"),
        "CORPUS_SLIME_ROOT": str(root),
        "CORPUS_ROOTS": f"{root}:{scratch}",
        "CORPUS_RECORD": str(scratch / "record.jsonl"),
        "CORPUS_MISSING_SOURCES": str(scratch / "missing.txt"),
        "CORPUS_REAL_PYTHON": sys.executable,
    }


_JSON_PAIR = re.compile(r'("([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*")([^"]*)(")')


def _masked(argv: list[str]) -> list[str]:
    """The argv with secrets masked: a secret flag's value, a credential by its shape, and the value of a
    secret-named variable in a --runtime-env-json (a script's placeholder key is masked all the same)."""
    argv = [_JSON_PAIR.sub(lambda m: m[1] + ("<masked>" if is_secret_name(m[2]) else m[3]) + m[4], word)
            if '"env_vars"' in word else word for word in argv]
    for i, secret in secret_arguments(argv).items():
        if '"env_vars"' not in argv[i]:  # masked by name above: the redactor takes any secret-named pair for one
            argv[i] = argv[i].replace(secret, "<masked>")
    return argv


def launch_scripts(root: Path) -> list[Path]:
    """Every script a user launches: *.sh under scripts/ and examples/ (not the model files they
    source), and the Python launchers of examples/ that call execute_train."""
    found = [p for p in sorted((root / "scripts").rglob("*.sh")) if "models" not in p.relative_to(root).parts]
    found += sorted((root / "examples").rglob("*.sh"))
    found += [p for p in sorted((root / "examples").rglob("*.py")) if "execute_train(" in p.read_text(errors="replace")]
    return found


def run_one(root: Path, script: Path, scratch: Path, env: dict[str, str]) -> dict:
    record, missing = Path(env["CORPUS_RECORD"]), Path(env["CORPUS_MISSING_SOURCES"])
    record.unlink(missing_ok=True)
    missing.unlink(missing_ok=True)
    rel = str(script.relative_to(root))
    if script.suffix == ".py":
        code = (f"exec(open({str(scratch / 'shim.py')!r}).read()); import runpy, sys; sys.argv = [{rel!r}]; "
                f"runpy.run_path({rel!r}, run_name='__main__')")
        command = [sys.executable, "-c", code]
        env = {**env, "PYTHONPATH": str(root)}
    else:
        command = ["bash", rel]
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    # As in slime's image: slime at /root/slime, HOME /root (the paths scripts derive from SCRIPT_DIR).
    recorded = record.read_text() if record.exists() else ""
    for here, image in ((str(root), "/root/slime"), (env["HOME"], "/root")):
        recorded = recorded.replace(json.dumps(here)[1:-1], json.dumps(image)[1:-1])
    commands = [json.loads(line) for line in recorded.splitlines()]
    for entry in commands:
        entry["env"] = {k: "<masked>" if is_secret_name(k) else v for k, v in sorted(entry["env"].items())
                        if not (k == "PYTHONPATH" and script.suffix == ".py")}
        entry["argv"] = _masked(entry["argv"])
    entry_of_script: dict = {"script": rel, "exit_code": proc.returncode}
    if missing.exists():
        entry_of_script["sourced_from_missing_path"] = sorted(set(missing.read_text().split()))
    if proc.returncode:
        entry_of_script["stderr_tail"] = proc.stderr.replace(str(root), "/root/slime")[-600:]
    entry_of_script["commands"] = commands
    return entry_of_script


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--slime", required=True, type=Path, help="a git clone of THUDM/slime that holds the commit")
    cli.add_argument("--commit", required=True, help="the commit to read (cpverify/data/known_flags.txt names the pin)")
    options = cli.parse_args()
    commit = subprocess.run(["git", "-C", str(options.slime), "rev-parse", f"{options.commit}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="slime-corpus-") as tmp:
        root, scratch = Path(tmp) / "slime", Path(tmp) / "scratch"
        root.mkdir()
        tar_path = Path(tmp) / "slime.tar"
        with open(tar_path, "wb") as out:
            subprocess.run(["git", "-C", str(options.slime), "archive", "--format=tar", commit], stdout=out, check=True)
        with tarfile.open(tar_path) as tar:
            tar.extractall(root, filter="data")
        env = write_scratch(scratch, root)
        scripts = [run_one(root, script, scratch, env) for script in launch_scripts(root)]
    head = {"generated_by": "tools/gen_launch_corpus.py", "slime_commit": commit, "nvidia_smi_gpus": GPUS,
            "user_env": USER_ENV}
    # One script a line: a regenerated corpus differs from the old one in the lines of the scripts that changed.
    lines = [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    rows = [f"  {json.dumps(script, ensure_ascii=False)}" for script in scripts]
    sys.stdout.write("{\n" + "\n".join(lines) + '\n "scripts": [\n' + ",\n".join(rows) + "\n ]\n}\n")


if __name__ == "__main__":
    main()
