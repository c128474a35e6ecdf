"""`cpverify run`: profile -> plan -> lint -> runner -> parse -> verdict -> report.

The steps, in order (each is also a nox session and a compose service):

  doctor      host facts and checks; a failed required check ends the run BLOCKED
  image       build the pinned image (docker runner only)
  fetch       model via huggingface_hub (or --model-dir), verified; prompt data staged (slime
              profiles); for train-only, the rollouts written in the workload's Python
  compileall  `python -m compileall slime/backends/megatron_utils` on the slime under test
  lint        every arm's arguments and environment, before any GPU is held: the static lint,
              then slime's own parser on each arm in the workload's Python (cpverify.lint.deep)
  cp1, cp2    round 1 of the baseline arm(s), then round 1 of the candidate arm(s) and every further
              round the design asks for, interleaved (cpverify.plan.rounds), on the same GPUs, under
              one lock
  verdict     parse every log, decide, write verdict.md / verdict.json / env.json / commands.sh

`--only a,b` runs some steps; steps share the run through artifacts/<run-id>/ (cpverify.run_state):
plan.json, written by the run's first step, fixes what the arms run (a later step whose arguments
would change it is refused), and state.json records what each step found and each arm's log, so
`nox -s cp2` after `nox -s cp1` (same CPVERIFY_RUN_ID) continues the same run. One process at a
time works in a run directory (a lock in it), and one signal policy covers the whole process:
Ctrl-C, SIGTERM or SIGHUP during any step still leaves an INCONCLUSIVE verdict saying what was
interrupted, and exits 130.
A step that does not apply (no image for the local runner, no model for the probe) says so
and succeeds. Arm steps succeed whenever they *recorded* a result: a crashed workload is
evidence for the verdict, not a reason to stop before writing it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpverify import config, course, doctor, fetch, image
from cpverify.artifacts import (
    LATEST,
    RunDir,
    atomic_write_json,
    file_digest,
    latest_run_id,
    new_run_id,
    point_latest,
)
from cpverify.config import RUNNERS
from cpverify.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_OK, CpverifyError, EnvironmentBlocked, InputError
from cpverify.inputs import shown_command
from cpverify.lint import deep as deep_lint
from cpverify.lint import format_findings, lint_plan
from cpverify.locks import GpuLock, RunDirLock
from cpverify.model import BASE, Arm, ArmInterrupted, ArmResult, Mount, Outcome
from cpverify.overrides import resolve_profile
from cpverify.parse import ParsedLog, parse_stream
from cpverify.plan import GRAD_NORM_LOAD, parse_gpus
from cpverify.plan import design as ab_design
from cpverify.plan import rounds as rounds_plan
from cpverify.profiles import Profile
from cpverify.progress import ArmsDisplay
from cpverify.redact import Pseudonyms, Redactor, redacted_terminal
from cpverify.revisions import checkout, revisions
from cpverify.run_state import ArmRecord, Interrupted, RunRecord, check_plan
from cpverify.runners import make_runner, runner_class
from cpverify.runners.base import BaseRunner, RunSetup
from cpverify.runners.watch import Terminated
from cpverify.runners.workload_env import secret_values
from cpverify.verdict import INCONCLUSIVE, ArmEvidence, Check, Thresholds, ab, across, decide
from cpverify.workload_python import WorkloadPython, requested_python
from cpverify.workload_python import workload_python as choose_python
from cpverify.workspace import CONTAINER_WORK, Workspace

STEPS = ("doctor", "image", "fetch", "compileall", "lint", "cp1", "cp2", "verdict")
ALIASES = {"arms": ("cp1", "cp2"), "all": STEPS}


@dataclass
class Context:
    """One `cpverify run` process: its arguments, the resolved profile, the run directory and what
    the run has recorded so far (state.json)."""

    args: argparse.Namespace
    profile: Profile
    run_dir: RunDir
    record: RunRecord = field(default_factory=RunRecord)
    design: rounds_plan.Design = field(default_factory=rounds_plan.Design)  # how many rounds (--rounds, --budget)
    rechecked: set[str] = field(default_factory=set)  # what this process has checked again itself (not from state)

    @property
    def kind(self) -> str:
        return self.profile.kind

    @property
    def runner(self) -> str:
        return self.args.runner

    @property
    def site(self) -> type[BaseRunner]:
        """Where the arms run, as the runner's class says it: `isolated` (in containers of the image),
        `remote` (on a cluster), or neither (here, with this machine's environment)."""
        return runner_class(self.args.runner)

    @property
    def arms_here(self) -> bool:
        """The arms run on this machine, in this machine's environment (the local runner)."""
        return not (self.site.isolated or self.site.remote)

    @property
    def cache(self) -> Path:
        return fetch.cache_root(self.args.cache).resolve()

    @functools.cached_property
    def workspace(self) -> Workspace:
        """What the user named for this run and where the workload sees it (cpverify.workspace)."""
        a = self.args
        return Workspace(self.profile, self.site, self.cache, _host_work_dir(self), model_dir=a.model_dir,
                         slime_dir=a.slime_dir, revisions=_revisions(self))

    @functools.cached_property
    def redactor(self):
        """The run's redaction: credentials always; identity unless --no-redact, with placeholders
        (host-1, ip-1) that every step and every file of this run share (logs/placeholders.json)."""

        p = self.profile
        secrets = secret_values(p.env, [*p.train_args, *p.probe_args])
        return Redactor(secrets, identity=not self.args.no_redact,
                        pseudonyms=Pseudonyms(self.run_dir.logs_dir / "placeholders.json"))

    @property
    def credentials_only(self):
        """The run's credential rules without the identity ones: for what the run directory keeps
        for itself (state.json, plan.json, the deep lint's request), whose paths later steps read back."""

        return Redactor(self.redactor.literals, identity=False)

    def save(self) -> None:
        self.record.save(self.run_dir.state_json, scrub=self.credentials_only.json)

    def say(self, text: str) -> None:
        print(f"[cpverify {self.run_dir.run_id}] {text}", file=sys.stderr, flush=True)


# -- the run's inputs (cpverify.workspace) -----------------------------------------------------

def _host_work_dir(ctx: Context) -> Path:
    """The run's writable work directory on this machine (mounted at CONTAINER_WORK in containers)."""
    return ctx.run_dir.root.resolve() / "work"


def _revisions(ctx: Context):
    """(base, candidate or None) slime revisions from --slime-ref/--slime-ref-candidate/--slime-dir-candidate,
    or None when the run uses --slime-dir (or the image's slime) as it is. Refs are exported once per run."""

    a = ctx.args
    return revisions(slime_dir=a.slime_dir, slime_ref=getattr(a, "slime_ref", None),
                     slime_ref_candidate=getattr(a, "slime_ref_candidate", None),
                     slime_dir_candidate=getattr(a, "slime_dir_candidate", None),
                     export_root=ctx.run_dir.root / "slime", local=not ctx.site.remote)


def build_run_plan(ctx: Context):
    gpus = None
    if ctx.args.gpus and ctx.args.gpus != "none":
        gpus = parse_gpus(ctx.args.gpus)
    python = workload_python(ctx)
    return ctx.workspace.plan(run_id=ctx.run_dir.run_id, gpus=gpus,
                              python=python.path if python is not None else "python3")


def workload_python(ctx: Context, *, refresh: bool = False):
    """The interpreter the local runner runs the arms with (None for docker and ray: there the arms'
    python3 is the image's or the cluster's). Chosen once and recorded in the run's state; the doctor
    and the arm steps choose again, since a new attempt re-checks what could have changed."""
    if not ctx.arms_here:
        return None

    explicit, _chosen_by = requested_python(getattr(ctx.args, "python", None))
    recorded = ctx.record.workload_python
    fresh_enough = not refresh or "workload_python" in ctx.rechecked
    if (recorded and fresh_enough and recorded.get("requested") == explicit
            and tuple(recorded["needs"]) == ctx.workspace.python_needs()):
        return WorkloadPython.from_json(recorded)
    python = ctx.workspace.find_python(getattr(ctx.args, "python", None))
    ctx.record.workload_python = {**python.to_json(), "requested": explicit}
    ctx.rechecked.add("workload_python")
    ctx.save()
    ctx.say(f"workload python: {python.path} ({python.chosen_by})"
            + ("" if python.ok else f"; it cannot import {', '.join(python.missing)}"))
    return python


# -- steps ------------------------------------------------------------------------------------

def step_doctor(ctx: Context) -> int:
    python = workload_python(ctx, refresh=True)
    if python is None:  # docker, ray: this host's torch is recorded for the report, not required

        explicit, chosen_by = requested_python(getattr(ctx.args, "python", None))
        python = choose_python(explicit, chosen_by=chosen_by)
    report = doctor.collect(cp=max(ctx.profile.cp_sizes), python=python, python_required=ctx.arms_here,
                            docker=ctx.site.isolated)
    ctx.record.doctor = report
    ctx.save()
    print(doctor.render(report), file=sys.stderr)
    if ctx.site.remote:
        # the arms run on the cluster, not here: this host's facts are recorded, the Ray
        # preflight checks the cluster's GPUs before anything is submitted
        ctx.say("doctor: facts of this host recorded; the Ray runner checks the cluster's GPUs itself")
        return EXIT_OK
    absent = _absent_gpus(ctx, report)
    if absent:
        return write_blocked(ctx, f"doctor: GPU {', '.join(absent)} of the plan does not exist on this host "
                                  f"(it has GPUs {', '.join(_host_gpus(report))})",
                             "pass --gpus with indices that `nvidia-smi -L` lists (or a count), or a profile "
                             "with fewer gpus")
    if report["status"] != "blocked":
        return EXIT_OK
    failed = [c for c in report["checks"] if c["required"] and c["status"] == "fail"]
    if ctx.args.gpus == "none":  # a GPU-less pipeline test: the facts are recorded, not enforced
        ctx.say("doctor: required checks fail, ignored because of --gpus none")
        return EXIT_OK
    reason = "; ".join(f"{c['name']}: {c['value']} (need {c['need']})" for c in failed)
    fix = " / ".join(dict.fromkeys(c["fix"] for c in failed if c["fix"]))
    return write_blocked(ctx, f"doctor: {reason}", fix)


def _host_gpus(report: dict) -> list[str]:
    gpus = ((report["facts"].get("gpus") or {}).get("value") or {}).get("gpus") or []
    return [str(g["index"]) for g in gpus]


def _absent_gpus(ctx: Context, report: dict) -> list[str]:
    """GPU indices the plan would use that the doctor did not find (only when it found some:
    no GPU at all is the gpu_count check's finding)."""
    host = _host_gpus(report)
    if not host or ctx.args.gpus == "none":
        return []
    return [str(g) for g in build_run_plan(ctx).gpus if str(g) not in host]


def step_image(ctx: Context) -> int:
    if not ctx.site.isolated:
        ctx.say(f"image: not needed by the {ctx.runner} runner (the workload runs where cpverify runs)")
        return EXIT_OK

    if ctx.args.image and not ctx.args.build:
        ctx.record.image = image.inspect_image(ctx.args.image)
        ctx.save()
        ctx.say(f"image: using {ctx.args.image} as given (pass --build to rebuild it)")
        return EXIT_OK
    lock = image.read_lock()
    overrides = {}
    if ctx.args.base_image:
        overrides["BASE_IMAGE"] = ctx.args.base_image
    if ctx.args.slime_commit is not None:
        overrides["SLIME_COMMIT"] = ctx.args.slime_commit
    if ctx.args.nccl:
        overrides["NCCL_PIP_SPEC"] = ctx.args.nccl
    if ctx.args.wheel_dir:
        overrides.update(image.stage_wheels(Path(ctx.args.wheel_dir)))
    build_args = image.build_args(lock, overrides)
    tag = ctx.args.image or image.image_tag(build_args)
    ctx.say(f"image: building {tag} from {build_args['BASE_IMAGE']}")
    try:
        image.build_image(tag=tag, args=build_args, log_path=ctx.run_dir.logs_dir / "image-build.log",
                          on_line=lambda line: ctx.say(f"  build: {line}"))
    except EnvironmentBlocked as exc:
        return write_blocked(ctx, exc.problem, exc.fix)
    facts = image.inspect_image(tag)
    facts["build_args"] = build_args
    facts["base_digest"] = lock.get("BASE_IMAGE_DIGEST") or image.resolve_digest(build_args["BASE_IMAGE"])
    facts["differences"] = image.compare_expected(lock, facts.get("versions", {}))
    for difference in facts["differences"]:
        ctx.say(f"image: warning: {difference}")
    ctx.record.image = facts
    ctx.save()
    return EXIT_OK


def step_fetch(ctx: Context) -> int:
    if ctx.kind != "slime":
        ctx.say(f"fetch: profile {ctx.profile.name} needs no model")
        return EXIT_OK
    p = ctx.profile
    if ctx.args.model_dir:
        model = Path(ctx.args.model_dir).expanduser().resolve()
        report = fetch.ensure_model(model, model_args=p.model_args)
        # a local directory (an offline host, a fine-tune, a random checkpoint): not the profile's hub revision
        ctx.record.model = {"repo": None, "revision": None, "path": str(model), "local": True,
                              "files_checked": report.checked}
        what = f"local model {model}"
    else:
        try:
            model = fetch.fetch_model(p.model_repo, p.model_revision, cache_dir=fetch.model_cache(ctx.cache))
        except EnvironmentBlocked as exc:  # no network: the run cannot happen here, and the verdict says so
            return write_blocked(ctx, f"fetch: {exc.problem}", exc.fix)
        report = fetch.ensure_model(model, model_args=p.model_args, revision=p.model_revision)
        ctx.record.model = {"repo": p.model_repo, "revision": p.model_revision, "path": str(model),
                              "files_checked": report.checked}
        what = f"model {p.model_repo}@{p.model_revision[:12]}"
    data = fetch.stage_dataset(p.dataset_path(), fetch.data_dir(ctx.cache))
    ctx.record.data = str(data)
    ctx.save()
    ctx.say(f"fetch: {what} verified ({report.checked} checksummed files), data {data}")
    if p.train_only:
        return _write_rollouts(ctx)
    return EXIT_OK


def _write_rollouts(ctx: Context) -> int:
    """The train-only arms' rollouts, written once per run by slime's own Sample class in the
    workload's Python (cpverify.slime_hooks.make_rollouts), where every arm can read them."""
    plan = build_run_plan(ctx)
    written = []
    for command in plan.data_commands:
        try:
            code, output = run_tool(ctx, command.name, list(command.argv), env=ctx.profile.env)
        except EnvironmentBlocked as exc:
            return write_blocked(ctx, f"fetch: {exc.problem}", exc.fix)
        if code != 0:
            raise InputError(f"writing the train-only rollouts failed ({' '.join(command.argv[:3])} exited {code}):\n"
                             f"{output.strip()[-2000:]}",
                             "the workload's Python must import slime and torch (and cpverify): run in the image "
                             "(--runner docker) or activate slime's environment; nothing was run on a GPU")
        written.append(output.strip().splitlines()[-1] if output.strip() else command.name)
    ctx.record.rollouts = written
    ctx.save()
    for line in written:
        ctx.say(f"fetch: {line}")
    return EXIT_OK


def run_tool(ctx: Context, name: str, argv: list[str], *, env=(), timeout_s: float = 900) -> tuple[int, str]:
    """Run a GPU-less command where the arms run, in the slime checkout: a throwaway container of the
    image with the arms' mounts (docker), else a subprocess in this environment (local; Ray: the
    checkout as the user points at it), with no GPU visible. Returns (exit code, output); the output
    is also kept as logs/<name>.log. Raises EnvironmentBlocked when it cannot start at all."""
    runner = make_runner(ctx.runner, run_setup(ctx))
    tool = Arm(name, 0, tuple(argv), tuple(env), ctx.workspace.paths()["slime_dir"])
    return runner.run_tool(tool, log_path=ctx.run_dir.logs_dir / f"{name}.log", timeout_s=timeout_s)


def step_compileall(ctx: Context) -> int:
    if ctx.kind != "slime":
        ctx.say(f"compileall: profile {ctx.profile.name} runs no slime code")
        return EXIT_OK
    target = "slime/backends/megatron_utils"
    python = workload_python(ctx)  # the arms' interpreter: the syntax it accepts is the one that counts
    command = [python.path if python is not None else "python3", "-m", "compileall", "-q", target]
    paths = ctx.workspace.paths()
    if ctx.site.remote and not Path(paths["slime_dir"]).is_dir():  # a path on the cluster's nodes
        ctx.say(f"compileall: {paths['slime_dir']} is not on this machine; skipped (the Ray runner checks it on the node)")
        return EXIT_OK
    try:
        code, output = run_tool(ctx, "compileall", command)
    except EnvironmentBlocked as exc:
        return write_blocked(ctx, f"compileall: {exc.problem}", exc.fix)
    ctx.record.compileall = {"exit_code": code, "output": output[-4000:]}
    ctx.save()
    if code != 0:
        raise InputError(f"`{' '.join(command)}` failed in {paths['slime_dir']}:\n{output.strip()[-2000:]}",
                         "fix the syntax error above in the slime checkout under test; nothing was run on a GPU")
    ctx.say(f"compileall: {target} compiles")
    return EXIT_OK


def step_lint(ctx: Context) -> int:
    plan = build_run_plan(ctx)
    findings = lint_plan(plan)
    if ctx.kind == "slime":
        findings = _deep_lint(ctx, plan, findings)
    if findings:
        print(format_findings(findings, redact=ctx.redactor), file=sys.stderr)
    errors = [f for f in findings if f.severity == "error"]
    ctx.record.lint = [dataclasses.asdict(f) for f in findings]
    ctx.save()
    if errors:
        ctx.say(f"lint: {len(errors)} error(s): fix them before any GPU is held")
        return EXIT_FAIL
    ctx.say(f"lint: {len(plan.arms)} arm(s) clean ({len(findings)} warning(s))")
    return EXIT_OK


def _deep_lint(ctx: Context, plan, static: list) -> list:
    """slime's own parse_args() on every arm, in the workload's Python (cpverify.lint.deep)."""
    arch = deep_lint.arch_from_doctor(ctx.record.doctor, plan.gpus)
    request = deep_lint.request(plan, arch if arch is not None else deep_lint.ASSUMED_ARCH)
    host_path = _host_work_dir(ctx) / "deep-lint-request.json"
    host_path.parent.mkdir(parents=True, exist_ok=True)
    # slime's parser needs the arguments' shape, not a secret's value: the file holds neither
    atomic_write_json(host_path, ctx.credentials_only.json(request))
    seen_path = f"{CONTAINER_WORK}/{host_path.name}" if ctx.site.isolated else str(host_path)
    python = plan.arms[0].argv[0]
    ctx.say("lint: slime's own parser on every arm, in the workload's Python (no GPU)")
    try:
        code, output = run_tool(ctx, "deep-lint", [python, *deep_lint.TOOL, seen_path], env=ctx.profile.env)
    except EnvironmentBlocked as exc:
        code, output = -1, f"{exc.problem} ({exc.fix})"
    results = deep_lint.results_from(output)
    ctx.record.deep_lint = results
    deep = deep_lint.findings(plan, results, exit_code=code, output=output, arch_assumed=arch is None,
                              classify=error_classes)
    return deep_lint.merge(static, deep, results)


def error_classes(text: str) -> list[tuple[str, str]]:
    """(class, coarse class) of every error the log parser reads in `text`, the finest first: the
    line of slime_num_rollout_not_set also carries its coarse assertion_error. The deep lint's
    `classify`: slime's refusal of an argument gets the fix its line would get in a log."""

    records = parse_stream(io.BytesIO(text.encode())).errors
    classes = [(r.cls, getattr(r, "coarse", "") or r.cls) for r in records]
    return sorted(classes, key=lambda pair: pair[0] == pair[1])


def step_arms(ctx: Context, which: str) -> int:
    """`cp1`: round 1 of the baseline arms; `cp2`: round 1 of the candidate arms, then every further
    round the design asks for, interleaved (cpverify.plan.rounds). A round already recorded is not
    run again: a continued run picks up where it stopped."""
    if ctx.record.blocked:
        ctx.say(f"{which}: skipped, the run is blocked: {ctx.record.blocked.problem}")
        return EXIT_OK
    python = workload_python(ctx, refresh=True)
    if python is not None and not python.ok:  # before any GPU is held: the arms would die on import
        if ctx.args.gpus != "none":
            return write_blocked(ctx, python.problem(), python.fix())
        ctx.say(f"{which}: {python.problem()}; ignored because of --gpus none")
    plan = build_run_plan(ctx)
    baseline = ctx.profile.baseline_cp
    first = [a for a in rounds_plan.round_order(plan.arms, baseline, 1)
             if rounds_plan.is_baseline(a, baseline) == (which == "cp1")]
    course.begin(ctx.record, ctx.design)
    ctx.save()
    # one line per running round (a live display on a terminal, plain lines elsewhere), through the runners' watcher
    displays: list[ArmsDisplay] = []
    runner = make_runner(ctx.runner, run_setup(ctx, progress=lambda report: displays[-1].update(report)))
    for what in runner.sweep_leftovers():  # a Docker engine that does not answer stops the run here (exit 4)
        ctx.say(f"{what} of an earlier, interrupted run")
    with GpuLock(plan.gpus, run_id=ctx.run_dir.run_id):
        _run_round(ctx, runner, displays, first, 1)
        if which == "cp2":
            _further_rounds(ctx, runner, displays, plan)
    return EXIT_OK


def _run_round(ctx: Context, runner, displays: list, arms, k: int) -> None:
    """Round k of `arms` (planned arms), in the order given, each unless it stands recorded."""
    todo = [a for a in arms if not course.done(ctx.record, a.name, k)]
    for arm in arms:
        if arm not in todo:
            ctx.say(f"{arm.as_round(k).name}: recorded by an earlier attempt of this run; kept")
    if not todo:
        return
    plan = build_run_plan(ctx)
    displays.append(ArmsDisplay([a.as_round(k).name for a in todo], ctx.profile.planned_rollouts,
                                prefix=f"[cpverify {ctx.run_dir.run_id}] ", every_s=config.progress_s()))
    with displays[-1] as display:
        for planned in todo:
            arm = planned.as_round(k)
            # The round's earlier result goes first: until this attempt ends, it has no result
            # (a cpverify killed outright leaves "never run", not a record of another log).
            ctx.record.arms.pop(arm.name, None)
            ctx.save()
            ctx.say(f"{arm.name}: starting on GPUs {','.join(map(str, plan.gpus)) or 'none'} "
                    f"with the {ctx.runner} runner; log {ctx.run_dir.log_path(arm.name)}")
            try:
                result = runner.run_arm(arm, log_path=_fresh_log(ctx, arm.name), limits=ctx.profile.limits())
            except ArmInterrupted as interrupted:
                _record_arm(ctx, interrupted.result, planned, k)
                ctx.record.interrupted = Interrupted(arm.name, interrupted.result.reason)
                ctx.save()
                raise
            _record_arm(ctx, result, planned, k)
            ctx.save()
            display.finish(arm.name, f"{result.outcome} (exit {result.exit_code})")
            ctx.say(f"{arm.name}: {result.outcome} (exit {result.exit_code}) after {result.duration_s:.0f}s"
                    + (f": {result.reason}" if result.reason else ""))


def _further_rounds(ctx: Context, runner, displays: list, plan) -> None:
    """Rounds 2, 3, ... of every arm, interleaved, until the design stops them (and says why). Each
    look is the verdict itself on the rounds so far, at the look's confidence (cpverify.course)."""
    parsed: dict = {}

    def look(rounds: int, index: int | None) -> dict:
        return across.look_of(_judge(ctx, plan, _evidence(ctx, plan, upto=rounds, parsed=parsed), look=index))

    k = 2
    while True:
        stop = course.next_stop(ctx.record, plan.arms, ctx.design, k - 1, look)
        ctx.save()
        if stop is not None:
            ctx.say(f"rounds: {k - 1} per arm; stopped ({stop.reason}): {stop.detail}")
            return
        order = rounds_plan.round_order(plan.arms, ctx.profile.baseline_cp, k)
        ctx.say(f"round {k}: " + ", ".join(a.as_round(k).name for a in order))
        _run_round(ctx, runner, displays, order, k)
        k += 1


def _record_arm(ctx: Context, result, planned: Arm, k: int) -> None:
    """Round k of a planned arm: its result and the log it wrote, fingerprinted now that nothing writes to it."""
    log = Path(result.log_path)
    sha256, size = file_digest(log) if log.is_file() else ("", 0)
    ctx.record.arms[planned.as_round(k).name] = ArmRecord(result, str(log.relative_to(ctx.run_dir.root)), sha256,
                                                          size, arm=planned.name, round=k)
    course.ran(ctx.record, planned.as_round(k).name)


def _arm_log(ctx: Context, recorded: ArmRecord):
    """The log the round wrote, as it wrote it (cpverify.course.recorded_log)."""
    return course.recorded_log(ctx.run_dir.root, recorded)


def _evidence(ctx: Context, plan, *, upto: int | None = None, parsed: dict | None = None) -> list[ArmEvidence]:
    """Every recorded round of every planned arm (rounds 1..upto) as the verdict's evidence, each log
    read as its round wrote it; an arm without a round, as the reason it has none. `parsed`: logs
    already read (a cache for the looks of one process)."""
    p, blocked, interrupted = ctx.profile, ctx.record.blocked, ctx.record.interrupted
    parsed = {} if parsed is None else parsed
    evidence = []
    for arm in plan.arms:
        recorded = [r for r in ctx.record.rounds_of(arm.name) if upto is None or r.round <= upto]
        for done in recorded:  # every round is evidence (a crash in round 3 is a crash); another run's is not ours
            key = (done.log, done.log_sha256)
            if key not in parsed:
                parsed[key] = _arm_log(ctx, done)
            evidence.append(ArmEvidence(done.result.arm, arm.cp, parsed[key], done.result,
                                        grad_norm_planned=GRAD_NORM_LOAD in arm.argv,
                                        expected_rollouts=p.planned_rollouts, log_path=ctx.run_dir.root / done.log,
                                        arm=arm.name, round=done.round, role=arm.role))
        if recorded:
            continue
        log_path = ctx.run_dir.log_path(arm.name)
        if blocked:
            result = ArmResult(arm.name, Outcome.BLOCKED, None, log_path, 0.0, reason=blocked.problem, fix=blocked.fix)
        elif interrupted:
            result = ArmResult(arm.name, Outcome.INTERRUPTED, None, log_path, 0.0,
                               reason=f"not run: the run was {interrupted.why} during {_step_name(interrupted.step)}",
                               fix="rerun when ready (a new run id starts with fresh logs)")
        else:
            result = ArmResult(arm.name, Outcome.BLOCKED, None, log_path, 0.0, reason="the arm was never run",
                               fix=f"run `cpverify run --only {'cp1' if arm.cp == p.baseline_cp else 'cp2'}` first "
                                   "(or `nox -s verify_cp`)")
        evidence.append(ArmEvidence(arm.name, arm.cp, ParsedLog(), result, grad_norm_planned=GRAD_NORM_LOAD in arm.argv,
                                    expected_rollouts=p.planned_rollouts, role=arm.role))
    return evidence


def _judge(ctx: Context, plan, evidence: list[ArmEvidence], *, look: int | None, run_checks=()):
    """The verdict on `evidence` at sequential look `look`, with the A/B's analysis when the plan is one."""
    verdict = decide(evidence, comparisons=list(plan.comparisons), thresholds=Thresholds.of(ctx.profile),
                     workload=ctx.profile.kind, run_checks=run_checks, look=look)
    design = ab_design(plan)
    if design is not None:  # two slime revisions: is the candidate's CP overhead smaller?
        verdict.ab = ab.analyze(verdict, design)
    return verdict


def step_verdict(ctx: Context) -> int:
    plan = build_run_plan(ctx)
    interrupted = ctx.record.interrupted
    run_checks = []
    if interrupted and interrupted.step not in ctx.record.arms:
        # Outside an arm's round (fetch, lint, between the rounds, this very step): what was measured stands,
        # but the run did not end as planned, so it cannot pass.
        detail = f"the run was {interrupted.why} during {_step_name(interrupted.step)}"
        run_checks.append(Check("interrupted", "fail", detail, "rerun when ready", effect=INCONCLUSIVE, brief=detail))
    verdict = _judge(ctx, plan, _evidence(ctx, plan), look=course.verdict_look(ctx.record, plan.arms),
                     run_checks=run_checks)
    verdict.rounds.update(course.summary(ctx.record, plan.arms, gpus=len(plan.gpus)))
    _write(ctx, plan, verdict)
    return verdict.exit_code


def _step_name(step: str) -> str:
    return f"arm {step}" if step not in STEPS or step in ("cp1", "cp2") else f"the {step} step"


# -- shared pieces ----------------------------------------------------------------------------

def write_blocked(ctx: Context, reason: str, fix: str) -> int:
    """Record that the run cannot happen here, and still leave a verdict a person can read."""
    ctx.record.blocked = EnvironmentBlocked(reason, fix)
    ctx.save()
    step_verdict(ctx)
    return EXIT_BLOCKED


def _write(ctx: Context, plan, verdict) -> None:
    from cpverify import report  # tabulate, matplotlib: the verdict step's alone, not `cpverify --help`'s

    env = {"cpverify_run": ctx.run_dir.run_id, "profile": dataclasses.asdict(ctx.profile),
           "runner": ctx.runner, "gpus": list(plan.gpus)}
    for key in ("doctor", "image", "model", "data", "rollouts", "compileall", "lint", "deep_lint", "workload_python"):
        if getattr(ctx.record, key) is not None:
            env[key] = getattr(ctx.record, key)
    # Secret flag values (--wandb-key V) sit in env.json's copy of the profile as plain list items.
    secrets = {value for arm in plan.arms for value in secret_values(arm.env, arm.argv)}
    ctx.redactor.add_secrets(secrets)
    env["sources"] = _sources(ctx)
    written = report.write_report(ctx.run_dir, verdict, env=env, commands_sh=plan.commands_sh(),
                                  redactor=ctx.redactor, plan_arms=plan.arms,
                                  command=shown_command(["cpverify", *sys.argv[1:]]))
    print(report.render_summary(verdict))
    ctx.say(f"verdict: {verdict.status} -> {ctx.run_dir.verdict_md}")
    print(report.share_lines(written), file=sys.stderr)


def _sources(ctx: Context) -> dict:
    """The slime commit the arms ran, where this machine can tell (an exported ref, a git checkout
    here); the image records its own slime and Megatron-LM commits (env.json's image)."""
    revs = _revisions(ctx)
    if revs:
        return {"slime": revs[0].commit, "slime_candidate": revs[1].commit if revs[1] else None}
    if ctx.args.slime_dir and not ctx.site.remote:
        return {"slime": checkout(ctx.args.slime_dir, BASE, must_exist=False).commit}
    return {}


def _fresh_log(ctx: Context, arm: str) -> Path:
    """The round's log path, empty: an earlier attempt's log is kept beside it, never appended to
    (two runs in one file would make the verdict INCONCLUSIVE)."""
    log_path = ctx.run_dir.log_path(arm)
    if log_path.exists():
        kept = log_path.with_name(f"{arm}.before-{time.strftime('%Y%m%d-%H%M%S')}.log")
        log_path.rename(kept)
        ctx.say(f"{arm}: the earlier attempt's log is kept as {kept.name}")
    return log_path


def _isolated_mounts(ctx: Context) -> list[Mount]:
    """The containers' mounts (cpverify.workspace), with the run's work directory made."""
    _host_work_dir(ctx).mkdir(parents=True, exist_ok=True)
    return ctx.workspace.mounts()


def run_setup(ctx: Context, *, progress=None) -> RunSetup:
    """What this run tells its runner (cpverify.runners.base.RunSetup): every runner takes what it needs."""
    gpus = None if ctx.args.gpus == "none" else build_run_plan(ctx).gpus
    return RunSetup(run_id=ctx.run_dir.run_id, gpus=gpus, pin_gpus=bool(ctx.args.gpus) and gpus is not None,
                    reserve_gpus=ctx.kind != "slime", mounts=tuple(_isolated_mounts(ctx)) if ctx.site.isolated else (),
                    image=(ctx.record.image or {}).get("image") or ctx.args.image, ulimits=not ctx.args.no_ulimits,
                    ray_address=ctx.args.ray_address, on_progress=progress)


STEP_FUNCTIONS = {
    "doctor": step_doctor,
    "image": step_image,
    "fetch": step_fetch,
    "compileall": step_compileall,
    "lint": step_lint,
    "cp1": lambda ctx: step_arms(ctx, "cp1"),
    "cp2": lambda ctx: step_arms(ctx, "cp2"),
    "verdict": step_verdict,
}


def selected_steps(only: str | None) -> list[str]:
    if not only:
        return list(STEPS)
    chosen: list[str] = []
    for word in only.split(","):
        word = word.strip()
        names = ALIASES.get(word, (word,))
        for name in names:
            if name not in STEPS:
                raise InputError(f"unknown step {word!r}", f"choose from {', '.join(STEPS)} (or arms, all)")
            if name not in chosen:
                chosen.append(name)
    return sorted(chosen, key=STEPS.index)


def matrix_assignments(args) -> list[str]:
    """--cp 1,2,4 and --seq-len 8K,32K,128K as profile overrides (after --set, so they win)."""
    out = []
    for flag, field_name, text in (("--cp", "cp_sizes", getattr(args, "cp", None)),
                                   ("--seq-len", "seq_lens", getattr(args, "seq_len", None))):
        if not text:
            continue
        try:
            sizes = [int(w[:-1]) * 1024 if w[-1] in "kK" else int(w) for w in text.replace(",", " ").split()]
        except ValueError:
            raise InputError(f"{flag} {text!r} is not a list of whole numbers",
                             f"write e.g. {flag} {'1,2,4' if flag == '--cp' else '8K,32K,128K'}") from None
        out.append(f"{field_name}={','.join(map(str, sizes))}")
    return out


def plan_definition(ctx: Context, plan) -> dict:
    """Everything that decides what the arms run, as plan.json records it (cpverify.run_state): the
    plan (argv and env of every arm, secrets masked), the profile's other fields (thresholds,
    limits, model), the runner and, for Docker, the mounts and the image asked for (inside a
    container the plan's paths are the same whichever checkout is mounted there)."""
    a = ctx.args
    arm_fields = ("about", "train_args", "model_args", "env", "probe_args")  # in the arms (masked), or words
    definition = {"runner": ctx.runner,
                  "profile": {k: v for k, v in dataclasses.asdict(ctx.profile).items() if k not in arm_fields},
                  "plan": plan.to_json()}
    if ctx.site.isolated:
        definition["mounts"] = [[str(m.source), m.target, m.read_only] for m in _isolated_mounts(ctx)]
        definition["image"] = {"image": a.image, "base_image": a.base_image, "slime_commit": a.slime_commit,
                               "nccl": a.nccl}
    if ctx.site.remote:
        definition["ray_address"] = a.ray_address
    return definition


def run(args: argparse.Namespace) -> int:
    """`cpverify run`: the steps --only names, in one process, under one run-directory lock."""
    if getattr(args, "seq_len", None):
        # judged on the profile before --seq-len becomes its seq_lens, whose own check names no option
        base = resolve_profile(args.profile, toml=args.config, assignments=list(args.assignments))
        if not (base.kind == "probe" or base.train_only):
            raise InputError(f"--seq-len applies to the probe and train-only profiles, not {base.name!r}",
                             "use --profile train-only (slime's trainer at the response lengths you give), or --profile "
                             "long, or --set train_args=... with --rollout-max-response-len")
    profile = resolve_profile(args.profile, toml=args.config, assignments=[*args.assignments, *matrix_assignments(args)])
    Thresholds.of(profile)  # thresholds the verdict would refuse (too few steps for an interval) are bad input now
    if args.runner not in RUNNERS:  # argparse checks choices on the command line, not a default from the environment
        raise InputError(f"CPVERIFY_RUNNER={args.runner!r} is not a runner",
                         f"set it to one of {', '.join(RUNNERS)} (or pass --runner)")
    runner_class(args.runner).check(RunSetup(ray_address=args.ray_address))  # what it would refuse later
    config.progress_s()  # a bad CPVERIFY_PROGRESS_S is bad input now, not after the lint
    design = rounds_plan.Design.of(getattr(args, "rounds", None), max_rounds=getattr(args, "max_rounds", None),
                                   budget=getattr(args, "budget", None))
    steps = selected_steps(args.only)
    run_id = latest_run_id(args.out) if args.run_id == LATEST else args.run_id
    run_dir = RunDir.create(base=args.out, run_id=run_id)
    with RunDirLock(run_dir.root, run_id=run_dir.run_id, new_run_id=new_run_id()):
        ctx = Context(args=args, profile=profile, run_dir=run_dir, design=design,
                      record=RunRecord.load(run_dir.state_json, new_run_id=new_run_id()))
        if steps != ["verdict"]:  # before the first step; the verdict of a run judges the logs it has
            ctx.workspace.check(wheel_dir=ctx.args.wheel_dir)
        try:
            point_latest(run_dir)
        except CpverifyError as exc:  # only the shortcut is missing: the run itself can go on
            ctx.say(f"warning: {exc}")
        if check_plan(run_dir.plan_json, ctx.credentials_only.json(plan_definition(ctx, build_run_plan(ctx))),
                      run_id=run_dir.run_id, new_run_id=new_run_id()):
            ctx.say(f"plan: {run_dir.plan_json} (every later step of this run must plan the same)")
        previous = ctx.record.interrupted
        if steps != ["verdict"] or (previous and previous.step == "verdict"):
            # a new attempt: whatever blocked or interrupted an earlier one is history (checked again)
            ctx.record.blocked = ctx.record.interrupted = None

        step = steps[0]
        with redacted_terminal(ctx.redactor):  # what the terminal shows uses the files' placeholders
            try:
                for step in steps:
                    code = STEP_FUNCTIONS[step](ctx)
                    if code != EXIT_OK:
                        return code
                    if ctx.record.blocked and step != "verdict":
                        return EXIT_BLOCKED
            except KeyboardInterrupt as exc:
                _verdict_after_interrupt(ctx, step, exc)
                raise
    return EXIT_OK


def _verdict_after_interrupt(ctx: Context, step: str, exc: KeyboardInterrupt) -> None:
    """Ctrl-C or SIGTERM in any step: record what was interrupted and still leave a verdict that
    says so (it takes a moment; another Ctrl-C skips it); the caller exits 130."""

    interrupted = ctx.record.interrupted
    if not isinstance(exc, ArmInterrupted) or interrupted is None:  # an arm records its own, with its result
        why = f"terminated ({exc.args[0]})" if isinstance(exc, Terminated) else "interrupted (Ctrl-C)"
        interrupted = ctx.record.interrupted = Interrupted(step, why)
    ctx.say(f"{_step_name(interrupted.step)} was {interrupted.why}; writing an "
            "INCONCLUSIVE verdict that says so (Ctrl-C again skips it)")
    try:
        ctx.save()
        step_verdict(ctx)
    except (KeyboardInterrupt, CpverifyError) as again:
        ctx.say(f"verdict not written after the interruption: {again or 'interrupted again'}")


