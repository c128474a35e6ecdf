"""The package's shape, checked from its source (ARCHITECTURE.md says why each rule exists).

These read the code with `ast`, so a change that breaks a rule fails here, naming the file and
the line, instead of drifting until the layout no longer says what the code does.
"""

from __future__ import annotations

import ast
import graphlib
import json
import re
from pathlib import Path

import pytest

from cpverify import config, runners
from cpverify.errors import InputError
from cpverify.model import ArmResult, Outcome
from cpverify.run_state import ArmRecord, RunRecord
from cpverify.verdict.terms import OUTCOME_EFFECTS

PACKAGE = Path(__file__).resolve().parents[1] / "cpverify"
# Code that runs inside the workload's own process, not in cpverify's.
WORKLOAD_SIDE = ("slime_hooks", "probe/workload.py", "probe/bandwidth.py")


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def _where(name: str, node: ast.AST) -> str:
    return f"{name.replace('.', '/')}.py:{node.lineno}"


def test_the_cli_choices_are_the_runners_there_are():
    assert tuple(runners.RUNNERS) == config.RUNNERS


def test_nothing_outside_the_factory_branches_on_a_runners_name():
    """The pipeline asks a runner's class what it needs (isolated, remote); comparing the name
    with 'docker' would put a second, partial factory wherever it appears."""
    names = set(config.RUNNERS)
    offenders = []
    for name, tree in modules().items():
        if name == "cpverify.runners":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                literals = {o.value for o in operands if isinstance(o, ast.Constant)}
                if literals & names and any("runner" in ast.unparse(o) for o in operands):
                    offenders.append(f"{_where(name, node)}: {ast.unparse(node)}")
    assert offenders == []


def test_cpverify_never_changes_its_own_environment():
    """What a workload gets is built for it (cpverify.runners.workload_env); writing os.environ would change
    every later step and every other arm of the run as well."""
    offenders = []
    for name, tree in modules().items():
        if any(part in name.replace(".", "/") for part in WORKLOAD_SIDE):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            writes = [t for t in targets if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ"]
            calls = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                     and ast.unparse(node.func.value) == "os.environ"
                     and node.func.attr in ("update", "setdefault", "pop", "clear"))
            if writes or calls or (isinstance(node, ast.Call) and ast.unparse(node.func) == "os.putenv"):
                offenders.append(f"{_where(name, node)}: {ast.unparse(node)[:80]}")
    assert offenders == []


# Where cpverify reads its environment whole, and why (ARCHITECTURE.md, "Configuration"); by name it is
# read in config.py alone (and, inside the workload, the launcher's RANK and WORLD_SIZE).
WHOLE_ENVIRONMENT = {
    "cpverify.runners.base": "the tools' environment (runners.workload_env's allow-list), this machine's secrets to scrub",
    "cpverify.runners.local": "the arms' environment (workload_env)",
    "cpverify.workspace": "the environment the local runner's interpreter is asked with (workload_env)",
    "cpverify.cli.probe": "the same, for cpverify probe's interpreter",
    "cpverify.workload_python": "the PATH an interpreter is looked for on, and the environment it is asked with",
    "cpverify.redact.environment": "the values of this machine's secret-named variables, removed literally",
    "cpverify.doctor.probes": "the host's facts (Host.env): the NCCL_, CUDA_, ... variables and the HF cache's",
    "cpverify.cli.lint": "--inherit-env: this shell's environment counted as the linted command's",
}


def test_the_environment_is_read_by_name_in_config_alone():
    """A setting read from the environment is in config.py (and the README's table): a read elsewhere
    would be a setting no one documents. Reading the whole environment is kept to WHOLE_ENVIRONMENT."""
    by_name, whole = [], set()
    for name, tree in modules().items():
        if name == "cpverify.config" or any(part in f"{name.replace('.', '/')}.py" for part in WORKLOAD_SIDE):
            continue
        for node in ast.walk(tree):
            text = ast.unparse(node) if isinstance(node, (ast.Attribute, ast.Call, ast.Subscript, ast.ImportFrom)) else ""
            if isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in ("environ", "getenv")
                                                                                   for a in node.names):
                by_name.append(f"{_where(name, node)}: {text}")
            elif isinstance(node, ast.Call) and (text.startswith(("os.environ.get(", "os.getenv(", "os.environ.pop("))):
                by_name.append(f"{_where(name, node)}: {text[:60]}")
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                by_name.append(f"{_where(name, node)}: {text[:60]}")
            elif isinstance(node, ast.Attribute) and text == "os.environ":
                whole.add(name)
    assert by_name == []
    assert whole == set(WHOLE_ENVIRONMENT)


@pytest.mark.parametrize("runner", config.RUNNERS)
def test_every_runner_is_built_on_the_one_base(runner):
    from cpverify.runners.base import BaseRunner

    cls = runners.runner_class(runner)
    assert issubclass(cls, BaseRunner) and cls.name == runner
    # the skeleton is the base's: a runner implements start(), not its own run_arm
    assert cls.run_arm is BaseRunner.run_arm


def _imported(tree: ast.Module) -> set[str]:
    """Every module a module imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


# `python -m cpverify`, `python -m cpverify.doctor`, `python -m cpverify.probe`: the entry points.
ENTRY_POINTS = ("cpverify.__main__", "cpverify.doctor.__main__", "cpverify.probe.__main__")


def test_the_commands_live_in_the_cli_and_nothing_below_it_imports_it():
    """cpverify/cli/ is argparse and printing; the stages and the edge take data and return data, so
    a stage that registers a subcommand, or imports the CLI, puts the terminal back inside the work."""
    offenders = []
    for name, tree in modules().items():
        if name == "cpverify.cli" or name.startswith("cpverify.cli."):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "register":
                offenders.append(f"{_where(name, node)}: def register")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser":
                offenders.append(f"{_where(name, node)}: {ast.unparse(node)[:60]}")
        if name not in ENTRY_POINTS and any(m == "cpverify.cli" or m.startswith("cpverify.cli.") for m in _imported(tree)):
            offenders.append(f"{name.replace('.', '/')}.py imports cpverify.cli")
    assert offenders == []


# The flow's stages in order (ARCHITECTURE.md, "The flow"): the modules of each.
STAGES = (
    ("profile", ("cpverify.profiles", "cpverify.overrides")),
    ("plan", ("cpverify.plan",)),
    ("lint", ("cpverify.lint",)),
    ("parse", ("cpverify.parse",)),
    ("verdict", ("cpverify.verdict",)),
    ("report", ("cpverify.report",)),
)
# What no stage imports: the runners, the driver (the pipeline, its steps and its run specification),
# the command line.
ABOVE_THE_STAGES = ("cpverify.runners", "cpverify.pipeline", "cpverify.steps", "cpverify.run_spec", "cpverify.cli")


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _stage(name: str) -> int | None:
    return next((i for i, (_, packages) in enumerate(STAGES) if _within(name, packages)), None)


def test_no_stage_imports_a_later_stage_or_a_runner():
    """A stage takes data from the stages before it and returns data; importing a later stage (or
    a runner, or the driver) is how the verdict and the report once came to import each other."""
    found = modules()
    assert all(any(_within(name, packages) for name in found) for _, packages in STAGES)  # no stale row
    offenders = []
    for name, tree in found.items():
        mine = _stage(name)
        if mine is None:
            continue
        for imported in _imported(tree):
            theirs = _stage(imported)
            if (theirs is not None and theirs > mine) or _within(imported, ABOVE_THE_STAGES):
                offenders.append(f"{name} ({STAGES[mine][0]}) imports {imported}")
    assert offenders == []


def test_the_steps_read_the_run_spec_not_the_command_line():
    """`cpverify run`'s Namespace is read in one place (run_spec.run_spec): the driver and its steps
    take the frozen RunSpec, so a default, a "none" or a check of an option lives in one definition."""
    readers = []
    for name, tree in modules().items():
        if not _within(name, ("cpverify.pipeline", "cpverify.steps")):
            continue
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == "args"]
            uses += [n for n in ast.walk(function) if isinstance(n, ast.Attribute) and n.attr == "args"
                     and not (isinstance(n.value, ast.Name) and n.value.id in ("exc", "again"))]
            if uses and not (name == "cpverify.pipeline" and function.name == "run"):
                readers.append(f"{_where(name, uses[0])} ({function.name})")
    assert readers == []


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The imports under `if TYPE_CHECKING:`, which never run."""
    return {inner for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            for statement in node.body for inner in ast.walk(statement)}


def _is_package(name: str) -> bool:
    return (PACKAGE / Path(*name.split(".")[1:]) / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports when it runs: at its top or inside a function (a
    function-local import is a cycle put off, not removed), not under TYPE_CHECKING. Importing
    `a.b.c` runs the packages `a.b` on the way, unless the importer is inside them already."""
    found = modules()

    def module_of(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, tree in found.items():
        skipped = _type_checking_only(tree)
        package = name if _is_package(name) else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if node in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base
                               for alias in node.names)
        edges = set()
        for target in targets:
            module = module_of(target)
            while module and module != name and not (name + ".").startswith(module + "."):
                edges.add(module)  # the module, then each package it is in that runs first
                module = module.rpartition(".")[0] or None
        graph[name] = edges
    return graph


def test_no_module_imports_itself_round_a_cycle():
    """A cycle of imports works or crashes by which of its modules is imported first, and an
    import inside a function only puts the crash off: each module imports only modules below it."""
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import cycle, each importing the next: {' -> '.join(reversed(exc.args[1]))}")


def test_a_private_module_is_imported_only_from_its_own_package():
    """A leading underscore says "nothing outside this package relies on me"; a module other
    packages import is part of the package's face and is named as such."""
    graph = import_graph()
    offenders = []
    for name, edges in graph.items():
        own = name if _is_package(name) else name.rpartition(".")[0]
        for imported in edges:
            package, _, leaf = imported.rpartition(".")
            if leaf.startswith("_") and not leaf.startswith("__") and package != own:
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_the_redaction_is_used_through_its_face():
    """cpverify.redact's modules are its parts: the rest of the package imports what it exports, so
    one definition of a secret has one way in."""
    offenders = []
    for name, tree in modules().items():
        if _within(name, ("cpverify.redact",)):
            continue
        for node in ast.walk(tree):
            imported = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                        [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            offenders += [f"{_where(name, node)}: {module}" for module in imported if module.startswith("cpverify.redact.")]
    assert offenders == []


MAX_MODULE_LINES = 600


def test_no_module_is_longer_than_a_reader_can_hold():
    """A module past 600 lines holds more than one idea: split it along the seams it has."""
    lengths = {str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
               for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def test_one_definition_of_a_terminal_escape_sequence():
    """A CSI sequence (colours, cursor movement) is terminal.CSI: the parse, the doctor and the
    redaction strip what the terminal neutralises, no more and no less."""
    def matches_csi(pattern: str) -> bool:  # ESC then "[", however the pattern spells them
        return "\x1b[" in pattern.replace("\\x1b", "\x1b").replace("\\[", "[")

    defined = [_where(name, node) for name, tree in modules().items() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and ast.unparse(node.func) == "re.compile" and node.args
               and isinstance(node.args[0], ast.Constant) and matches_csi(str(node.args[0].value))]
    assert [where.split(":")[0] for where in defined] == ["cpverify/terminal.py"]


def test_the_stacks_minimums_are_defined_once():
    """The doctor checks the host, the verdict the logs and the fixes name the same minimums."""
    minimums = {"MIN_COMPUTE_CAPABILITY", "MIN_DRIVER", "MIN_CUDA", "MIN_NCCL"}
    defined = [_where(name, node) for name, tree in modules().items() for node in ast.walk(tree)
               if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in minimums for t in node.targets)]
    assert {where.split(":")[0] for where in defined} == {"cpverify/versions.py"} and len(defined) == len(minimums)


def _chain(depends_on: dict[str, list[str]], last: str) -> list[str]:
    """The steps that end in `last`, each depending on the one before it alone."""
    chain = [last]
    while depends_on.get(chain[0]):
        (before,) = depends_on[chain[0]]
        chain.insert(0, before)
    return chain


def test_the_steps_are_one_chain_in_the_pipeline_in_nox_and_in_compose():
    """`cpverify run`, `nox -s verify_cp` and `docker compose up verdict` run the same steps in the
    same order (pipeline.STEPS): a step added to one and not the others would be skipped there."""
    import yaml

    from cpverify.pipeline import STEPS

    root = PACKAGE.parent
    sessions: dict[str, list[str]] = {}
    for node in ast.parse((root / "noxfile.py").read_text(encoding="utf-8")).body:
        calls = [d for d in getattr(node, "decorator_list", ()) if isinstance(d, ast.Call) and ast.unparse(d.func) == "nox.session"]
        if calls:
            requires = next((k.value for k in calls[0].keywords if k.arg == "requires"), None)
            sessions[node.name] = [] if requires is None else ast.literal_eval(requires)
            steps = [c.args[1].value for c in ast.walk(node) if isinstance(c, ast.Call) and ast.unparse(c.func) == "_step"]
            assert steps in ([], [node.name]), f"session {node.name} runs step {steps}"
    assert _chain(sessions, "verdict") == list(STEPS)
    assert sessions["verify_cp"] == ["verdict"]

    services = yaml.safe_load((root / "compose.yaml").read_text(encoding="utf-8"))["services"]
    assert {name: service["command"] for name, service in services.items()} == {step: [step] for step in STEPS}
    assert _chain({name: list(service.get("depends_on", {})) for name, service in services.items()}, "verdict") == list(STEPS)


# A verdict's status and a check row's status are model.Status and model.CheckStatus, spelled by
# their members (str enums: verdict.json is unchanged). Modules not yet moved to them, and why.
STATUS_WORDS = {"PASS", "FAIL", "INCONCLUSIVE", "BLOCKED", "pass", "fail", "warn", "skip"}
STATUS_USERS = ("cpverify.verdict", "cpverify.report", "cpverify.fixes", "cpverify.pipeline", "cpverify.steps",
                "cpverify.cli.verdict")
BARE_STATUS_LEFT = {
    # reads the doctor's report, whose host checks have words of their own (pass, fail, warn, unknown)
    "cpverify.steps.prepare",
}


def test_one_status_vocabulary():
    offenders = {}
    for name, tree in modules().items():
        if not _within(name, STATUS_USERS) or name in BARE_STATUS_LEFT:
            continue
        exports = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
        names = {id(inner) for export in exports for inner in ast.walk(export)}  # __all__ lists names, not statuses
        bare = [node.lineno for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value in STATUS_WORDS and id(node) not in names]
        if bare:
            offenders[name] = bare
    assert offenders == {}
    assert all(_within(name, STATUS_USERS) for name in BARE_STATUS_LEFT)



@pytest.mark.parametrize("outcome", [*Outcome, "exploded"])
def test_an_outcome_read_back_is_one_of_the_outcomes_and_forces_its_effect(tmp_path, outcome):
    """Every Outcome has its effect on the verdict (OUTCOME_EFFECTS, keyed by the members); a state.json
    whose round ended otherwise is bad input, not a row of unknown meaning."""
    assert set(OUTCOME_EFFECTS) == set(Outcome) and {type(key) for key in OUTCOME_EFFECTS} == {Outcome}
    record = RunRecord(arms={"cp1": ArmRecord(ArmResult("cp1", Outcome.OK, 0, Path("cp1.log"), 1.0), "logs/cp1.log",
                                              "0" * 64, 1)})
    state = record.to_json()
    state["arms"]["cp1"]["outcome"] = str(outcome)
    (tmp_path / "state.json").write_text(json.dumps(state))
    if outcome in list(Outcome):
        read = RunRecord.load(tmp_path / "state.json", new_run_id="new").arms["cp1"].result.outcome
        assert type(read) is Outcome and read == outcome
    else:
        with pytest.raises(InputError):
            RunRecord.load(tmp_path / "state.json", new_run_id="new")

# An arm's name is made in one place (plan.build.arm_name, model.round_name for its rounds) from what
# model.Arm carries as data: its CP, response length, A/B role and round. What an arm is flows as
# those fields; nothing takes a name apart to learn it.
ARM_NAME_MAKERS = ("cpverify.plan.build", "cpverify.model")
# A part of an arm's name as a literal spells it: a CP (cp2, `cp` then a number or a placeholder), a
# response length (-s16k), a round (.r2) or an A/B role (base-, cand-); in plain text or in a regex.
ARM_NAME_PART = re.compile(r"(?<![A-Za-z])cp(?:\d|\\d|\{|\(|\[|-|$)|-s(?:\d|\\d|\{|\(|\[)|\.r(?:\d|\\d|\{|\(|\[)"
                           r"|\\\.r|(?<![A-Za-z])(?:base|cand)-")
STRING_MATCHING = {"split", "rsplit", "partition", "rpartition", "startswith", "endswith", "removeprefix",
                   "removesuffix", "find", "rfind", "index", "rindex", "count", "replace"}
REGEX_FUNCTIONS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}
NAME_FIELDS = {"name", "planned", "arm"}  # an arm's name, a round's planned arm (ArmEvidence, ArmSummary, ArmRecord)


def _spelled(node: ast.AST) -> list[str]:
    """The text of the string literals in `node` (an f-string's parts joined by `{}`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [text for element in node.elts for text in _spelled(element)]
    return []


def _a_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in NAME_FIELDS


def name_parsing(tree: ast.Module) -> list[ast.AST]:
    """Where `tree` reads something out of a name: matches a literal that spells a part of an arm's
    name (a string method, `in`, a regex), or takes a name field apart (split, a regex, an index)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            regex = method in REGEX_FUNCTIONS and ast.unparse(receiver) == "re"
            literals = [t for a in (node.args[:1] if regex else node.args if method in STRING_MATCHING else ())
                        for t in _spelled(a)]
            taken_apart = (method in {"split", "rsplit", "partition", "rpartition"} and _a_name(receiver)) or (
                method in REGEX_FUNCTIONS and any(_a_name(a) for a in node.args))
            if taken_apart or any(ARM_NAME_PART.search(t) for t in literals):
                found.append(node)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if any(ARM_NAME_PART.search(t) for t in _spelled(node.left)) or any(_a_name(c) for c in node.comparators):
                found.append(node)
        elif isinstance(node, ast.Subscript) and _a_name(node.value):
            found.append(node)
    return found


def test_nothing_reads_what_an_arm_is_out_of_its_name():
    offenders = [f"{_where(name, node)}: {ast.unparse(node)[:80]}" for name, tree in modules().items()
                 if name not in ARM_NAME_MAKERS for node in name_parsing(tree)]
    assert offenders == []


@pytest.mark.parametrize("code", [
    'role = summary.name.split("-", 1)[0]',
    'if summary.name.startswith(("base-", "cand-")): pass',
    'match = _SEQ_SUFFIX.search(summary.name)',
    '_SEQ_SUFFIX = re.compile(r"-s(\\d+)(k?)$")',
    'base = next(m for n, m in medians if n.startswith("cp1-"))',
    'cand = next(m for n, m in medians if n.startswith(f"cp{cp}-"))',
    'medians = [n for n in arms if n.startswith("cp")]',
    'planned = ev.name.removesuffix(f".r{ev.round}")',
    'rounds = re.match(r"(.*)\\.r(\\d+)$", log)',
    'if "-s" in arm.name: pass',
    'cp = int(arm.name[2])',
])
def test_the_name_rule_sees_each_way_of_taking_a_name_apart(code):
    assert name_parsing(ast.parse(code)) != []


@pytest.mark.parametrize("code", [
    'if check.name.startswith("error:"): pass',
    'flag, eq, value = token.partition("=")',
    'layout = {"cp": arm.cp, "dp": 1}',
    'label = f"CP={arm.cp}"',
    'text = " ".join(line.split())',
])
def test_the_name_rule_leaves_other_strings_alone(code):
    assert name_parsing(ast.parse(code)) == []
