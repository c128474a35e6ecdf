"""The steps before the lint: doctor (host facts and checks), image (docker), fetch (model, data,
train-only rollouts), compileall (the slime under test compiles)."""

from __future__ import annotations

import sys
from pathlib import Path

from cpverify import doctor, fetch, image
from cpverify.errors import EXIT_OK, EnvironmentBlocked, InputError
from cpverify.steps.context import Context
from cpverify.steps.verdict import write_blocked
from cpverify.workload_python import requested_python
from cpverify.workload_python import workload_python as choose_python


def step_doctor(ctx: Context) -> int:
    python = ctx.workload_python(refresh=True)
    if python is None:  # docker, ray: this host's torch is recorded for the report, not required
        explicit, chosen_by = requested_python(ctx.spec.python)
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
    if ctx.spec.gpu_less:  # a GPU-less pipeline test: the facts are recorded, not enforced
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
    if not host or ctx.spec.gpu_less:
        return []
    return [str(g) for g in ctx.plan.gpus if str(g) not in host]


def step_image(ctx: Context) -> int:
    if not ctx.site.isolated:
        ctx.say(f"image: not needed by the {ctx.runner} runner (the workload runs where cpverify runs)")
        return EXIT_OK
    asked = ctx.spec.image
    if asked.image and not asked.build:
        ctx.record.image = image.inspect_image(asked.image)
        ctx.save()
        ctx.say(f"image: using {asked.image} as given (pass --build to rebuild it)")
        return EXIT_OK
    lock = image.read_lock()
    overrides = {}
    if asked.base_image:
        overrides["BASE_IMAGE"] = asked.base_image
    if asked.slime_commit is not None:
        overrides["SLIME_COMMIT"] = asked.slime_commit
    if asked.nccl:
        overrides["NCCL_PIP_SPEC"] = asked.nccl
    if asked.wheel_dir:
        overrides.update(image.stage_wheels(Path(asked.wheel_dir)))
    build_args = image.build_args(lock, overrides)
    tag = asked.image or image.image_tag(build_args)
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
    if ctx.spec.model_dir:
        model = Path(ctx.spec.model_dir).expanduser().resolve()
        report = fetch.ensure_model(model, model_args=p.model_args)
        # a local directory (an offline host, a fine-tune, a random checkpoint): not the profile's hub revision
        ctx.record.model = {"repo": None, "revision": None, "path": str(model), "local": True,
                            "files_checked": report.checked}
        what = f"local model {model}"
    else:
        try:
            model = fetch.fetch_model(p.model_repo, p.model_revision, cache_dir=fetch.model_cache(ctx.spec.cache))
        except EnvironmentBlocked as exc:  # no network: the run cannot happen here, and the verdict says so
            return write_blocked(ctx, f"fetch: {exc.problem}", exc.fix)
        report = fetch.ensure_model(model, model_args=p.model_args, revision=p.model_revision)
        ctx.record.model = {"repo": p.model_repo, "revision": p.model_revision, "path": str(model),
                            "files_checked": report.checked}
        what = f"model {p.model_repo}@{p.model_revision[:12]}"
    data = fetch.stage_dataset(p.dataset_path(), fetch.data_dir(ctx.spec.cache))
    ctx.record.data = str(data)
    ctx.save()
    ctx.say(f"fetch: {what} verified ({report.checked} checksummed files), data {data}")
    if p.train_only:
        return _write_rollouts(ctx)
    return EXIT_OK


def _write_rollouts(ctx: Context) -> int:
    """The train-only arms' rollouts, written once per run by slime's own Sample class in the
    workload's Python (cpverify.slime_hooks.make_rollouts), where every arm can read them."""
    written = []
    for command in ctx.plan.data_commands:
        try:
            code, output = ctx.run_tool(command.name, list(command.argv), env=ctx.profile.env)
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


def step_compileall(ctx: Context) -> int:
    if ctx.kind != "slime":
        ctx.say(f"compileall: profile {ctx.profile.name} runs no slime code")
        return EXIT_OK
    target = "slime/backends/megatron_utils"
    command = [ctx.interpreter, "-m", "compileall", "-q", target]  # the arms' Python: its syntax is the one that counts
    paths = ctx.workspace.paths()
    if ctx.site.remote and not Path(paths["slime_dir"]).is_dir():  # a path on the cluster's nodes
        ctx.say(f"compileall: {paths['slime_dir']} is not on this machine; skipped (the Ray runner checks it on the node)")
        return EXIT_OK
    try:
        code, output = ctx.run_tool("compileall", command)
    except EnvironmentBlocked as exc:
        return write_blocked(ctx, f"compileall: {exc.problem}", exc.fix)
    ctx.record.compileall = {"exit_code": code, "output": output[-4000:]}
    ctx.save()
    if code != 0:
        raise InputError(f"`{' '.join(command)}` failed in {paths['slime_dir']}:\n{output.strip()[-2000:]}",
                         "fix the syntax error above in the slime checkout under test; nothing was run on a GPU")
    ctx.say(f"compileall: {target} compiles")
    return EXIT_OK
