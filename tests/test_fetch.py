"""fetch: the real huggingface_hub code against a cache built on disk (no network here).

The hub itself cannot be reached from CI, so the tests lay out the cache exactly as
`snapshot_download` leaves it (tests/helpers/hfcache.py) and run with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import json
import logging
import socket

import pytest

from cpverify import fetch
from cpverify.errors import EXIT_BLOCKED, DatasetError, EnvironmentBlocked, ModelError
from cpverify.profiles import get_profile
from cpverify.redact import Redactor
from helpers.hfcache import QWEN_CONFIG, make_model_cache
from helpers.nobody import as_nobody, public_dir

PROFILE = get_profile("smoke")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "hf"


@pytest.fixture
def no_hub(monkeypatch):
    """A hub endpoint that refuses every connection (a closed port on this machine), with no proxy
    in between: what a host without network sees, deterministically and without a network."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", endpoint)
    return endpoint


def test_offline_fetch_finds_the_pinned_snapshot_and_verifies_it(offline, cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    path = fetch.fetch_model(PROFILE.model_repo, PROFILE.model_revision, cache_dir=cache)
    assert path == snapshot
    report = fetch.ensure_model(path, model_args=PROFILE.model_args, revision=PROFILE.model_revision)
    assert report.ok and report.checked == 4


def test_offline_fetch_without_the_model_names_the_fix(offline, cache):
    with pytest.raises(ModelError) as err:
        fetch.fetch_model(PROFILE.model_repo, PROFILE.model_revision, cache_dir=cache)
    assert "HF_HUB_OFFLINE" in err.value.problem and "cpverify fetch" in err.value.fix


def test_truncated_weights_are_caught_by_their_checksum(cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    blob = (snapshot / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:100])  # an interrupted download
    with pytest.raises(ModelError) as err:
        fetch.ensure_model(snapshot, model_args=PROFILE.model_args)
    assert "model.safetensors" in err.value.problem  # the file to fetch again
    assert "cpverify fetch" in err.value.fix


def test_corrupted_small_file_is_caught_by_its_git_hash(cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    (snapshot / "tokenizer_config.json").resolve().write_text('{"model_max_length": 1}')
    report = fetch.verify_snapshot(snapshot)
    assert any("tokenizer_config.json" in p for p in report.problems)


def test_missing_files_are_named(cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    (snapshot / "config.json").unlink()
    (snapshot / "model.safetensors").unlink()
    problems = fetch.verify_snapshot(snapshot).problems
    assert len(problems) == 2 and any("config.json" in p for p in problems) and any("safetensors" in p for p in problems)


def test_missing_directory_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        fetch.ensure_model(tmp_path / "nowhere", model_args=PROFILE.model_args)


def test_wrong_model_for_the_profile_model_args(cache):
    config = dict(QWEN_CONFIG, num_hidden_layers=28, hidden_size=1536)  # a Qwen2.5-1.5B config
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision, config=config)
    with pytest.raises(ModelError) as err:
        fetch.ensure_model(snapshot, model_args=PROFILE.model_args)
    assert "num_hidden_layers=28" in err.value.problem and "--num-layers 24" in err.value.problem  # both sides
    assert "hidden_size=1536" in err.value.problem


def test_sharded_index_with_a_missing_shard(cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    problems = fetch.verify_snapshot(snapshot).problems
    assert problems == ["missing weight shard model-00001-of-00002.safetensors",
                        "missing weight shard model-00002-of-00002.safetensors"]


def test_stage_dataset_validates_and_copies(tmp_path):
    target = fetch.stage_dataset(PROFILE.dataset_path(), tmp_path / "data")
    assert target.read_bytes() == PROFILE.dataset_path().read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{not json\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl:2: invalid JSON"):
        fetch.stage_dataset(bad, tmp_path / "data2")
    assert not (tmp_path / "data2" / "bad.jsonl").exists()


def test_fetch_cli_offline_prints_the_snapshot(offline, tmp_path, capsys):
    from cpverify.cli import main

    make_model_cache(tmp_path / "cache" / "hf", PROFILE.model_repo, PROFILE.model_revision)
    code = main(["fetch", "--cache", str(tmp_path / "cache"), "--json"])  # the cache root, as `run --cache`
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["files_checked"] == 4 and out["revision"] == PROFILE.model_revision
    assert out["data"] == str(tmp_path / "cache" / "data" / "cp_smoke.jsonl")


def test_fetch_and_run_use_the_same_cache_by_default(offline, tmp_path, monkeypatch, capsys):
    """With neither --cache nor CPVERIFY_CACHE, `cpverify fetch` must find (and stage into) the
    cache `cpverify run` reads: ~/.cache/cpverify, the model under hf/, the data under data/ (not
    huggingface_hub's own cache, whose model the run would never see)."""
    from cpverify.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name in ("CPVERIFY_CACHE", "HF_HOME", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    snapshot = make_model_cache(home / ".cache" / "cpverify" / "hf", PROFILE.model_repo, PROFILE.model_revision)

    assert main(["fetch", "--json"]) == 0
    fetched = json.loads(capsys.readouterr().out)
    shown = Redactor()  # what the terminal shows of a path: a home path as ~/...
    assert fetched["model"] == shown(str(snapshot))
    assert fetched["data"] == shown(str(home / ".cache" / "cpverify" / "data" / "cp_smoke.jsonl"))

    # `cpverify run`'s own fetch step (it needs no engine: docker only mounts what the fetch verified)
    out = tmp_path / "artifacts"
    assert main(["run", "--runner", "docker", "--only", "fetch", "--out", str(out), "--run-id", "cache-agree"]) == 0
    state = json.loads((out / "cache-agree" / "state.json").read_text())
    # state.json keeps the paths (later steps read them back): the same files the fetch command found
    assert state["model"]["path"] == str(snapshot)
    assert state["data"] == str(home / ".cache" / "cpverify" / "data" / "cp_smoke.jsonl")



@pytest.mark.parametrize("written", [["--num-layers", "12"], ["--num-layers=12"], ["--num-layers", "24", "--num-layers", "12"]])
def test_model_args_are_read_as_megatron_reads_them(cache, written):
    """`--flag=value` and a repeated flag (the last wins) are what Megatron reads: a config.json that
    disagrees with them is the wrong model, however MODEL_ARGS spells the flag."""
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)  # 24 layers
    assert fetch.check_model_args(snapshot, written) == [
        f"config.json num_hidden_layers={QWEN_CONFIG['num_hidden_layers']} but MODEL_ARGS has --num-layers 12"]
    assert fetch.check_model_args(snapshot, ["--num-layers", "$LAYERS"]) == [
        "MODEL_ARGS has --num-layers '$LAYERS', not a number"]


def test_staging_leaves_no_temporary_file_and_a_failed_write_names_the_cache(tmp_path):
    data = tmp_path / "data"
    fetch.stage_dataset(PROFILE.dataset_path(), data)
    assert [p.name for p in data.iterdir()] == [PROFILE.dataset_path().name]
    with public_dir() as public:  # a real EACCES: root writes anywhere, so the staging runs as `nobody`
        locked = public / "data"
        locked.mkdir(mode=0o555)
        locked.chmod(0o555)
        proc = as_nobody("from cpverify import fetch\nfrom cpverify.errors import ArtifactWriteError",
                         f"try:\n    fetch.stage_dataset(fetch.Path({str(PROFILE.dataset_path())!r}), "
                         f"fetch.Path({str(locked)!r}))\n"
                         "except ArtifactWriteError as e:\n    print(e.problem, '|', e.fix)")
        assert proc.returncode == 0 and "|" in proc.stdout, proc.stderr  # the ArtifactWriteError was raised
        assert "--cache" in proc.stdout.split("|", 1)[1]  # its fix names the option that moves the cache
        assert list(locked.iterdir()) == []


def test_an_unreachable_hub_blocks_the_fetch_in_one_error_without_the_hubs_retries(no_hub, cache, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EnvironmentBlocked) as raised:
        fetch.fetch_model(PROFILE.model_repo, PROFILE.model_revision, cache_dir=cache, endpoint=no_hub)
    assert raised.value.exit_code == EXIT_BLOCKED and raised.value.fix == fetch.NO_HUB_FIX
    assert [r for r in caplog.records if r.name.startswith("huggingface_hub") and r.levelno >= logging.WARNING] == []
    assert fetch.hub_unreachable(no_hub) is not None


def test_fetch_cli_without_network_exits_blocked_with_one_error(no_hub, tmp_path, capsys):
    from cpverify.cli import main

    assert main(["fetch", "--cache", str(tmp_path / "cache")]) == EXIT_BLOCKED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("cpverify: error: ") and err[1].startswith("  fix: "), err


def test_a_cached_model_is_used_when_the_hub_cannot_be_reached(no_hub, cache):
    snapshot = make_model_cache(cache, PROFILE.model_repo, PROFILE.model_revision)
    assert fetch.fetch_model(PROFILE.model_repo, PROFILE.model_revision, cache_dir=cache, offline=False) == snapshot


def test_an_unreachable_hub_blocks_the_run_with_a_verdict_that_says_so(no_hub, tmp_path, capsys):
    from cpverify.cli import main

    out = tmp_path / "artifacts"
    code = main(["run", "--runner", "docker", "--only", "fetch", "--cache", str(tmp_path / "cache"), "--out", str(out),
                 "--run-id", "offline"])
    verdict = json.loads((out / "offline" / "verdict.json").read_text())
    assert code == EXIT_BLOCKED and verdict["status"] == "BLOCKED"
    assert {c["fix"] for c in verdict["checks"] if c["status"] == "fail"} == {fetch.NO_HUB_FIX}
