"""`cpverify fetch`: the profile's model (huggingface_hub, or a local directory) and prompt data, verified."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cpverify import config
from cpverify.fetch import cache_root, data_dir, ensure_model, fetch_model, model_cache, stage_dataset
from cpverify.profiles import get_profile


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fetch", help="download and verify the profile's model, stage the prompt data",
        description="Download the profile's model at its pinned revision with huggingface_hub (HF_TOKEN, "
                    "HF_ENDPOINT and HF_HUB_OFFLINE apply), re-hash every file against the hub's checksums, "
                    "check config.json against the profile's model arguments, and stage the prompt data. "
                    "`cpverify run` does the same in its fetch step. A partial or corrupted model, or a "
                    "broken prompt line, exits 2 naming the file and the fix; a hub this machine cannot reach "
                    "(no network, no proxy) exits 4 (BLOCKED) at once, unless the cache already holds the model.")
    p.add_argument("--profile", default="smoke", help="the profile whose model and data to fetch (default: %(default)s)")
    p.add_argument("--cache", default=config.cache(),
                   help="the cpverify cache, as `cpverify run --cache` takes it: the model goes to <cache>/hf, the "
                        "data to <cache>/data (default: %(default)s; CPVERIFY_CACHE sets it)")
    p.add_argument("--data-dir", type=Path, default=None, help="where to stage the prompt data (default: <cache>/data)")
    p.add_argument("--offline", action="store_true", help="use the cache only (same as HF_HUB_OFFLINE=1)")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="a local model directory to verify instead of downloading (offline hosts, your own "
                        "checkpoint): required files, weights, config.json against the model arguments")
    p.add_argument("--json", action="store_true", help="print the model path, revision and data path as JSON")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    cache = cache_root(args.cache)
    out: dict[str, object] = {"profile": profile.name}
    if getattr(profile, "kind", "slime") == "slime":
        if args.model_dir:  # a local directory: no hub revision to claim, its files are checked as they are
            path = args.model_dir.expanduser().resolve()
            report = ensure_model(path, model_args=profile.model_args)
            out.update(model=str(path), revision=None, files_checked=report.checked)
        else:
            path = fetch_model(profile.model_repo, profile.model_revision, cache_dir=model_cache(cache),
                               offline=args.offline or None)
            report = ensure_model(path, model_args=profile.model_args, revision=profile.model_revision)
            out.update(model=str(path), revision=profile.model_revision, files_checked=report.checked)
        out["data"] = str(stage_dataset(Path(profile.dataset_path()), args.data_dir or data_dir(cache)))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")
    return 0
