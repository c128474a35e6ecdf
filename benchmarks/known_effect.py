"""A slime checkout with a known cost added, for proving what a verdict can see (issue 22's "known
effect"): `python3 benchmarks/known_effect.py SLIME_DIR OUT_DIR --seconds S [--every-cp]`.

OUT_DIR is a copy of SLIME_DIR whose `loss_function` (slime/backends/megatron_utils/loss.py, called once
per micro-batch of actor_train; model.py imports it from there) first waits S seconds on every rank,
after the GPU is done with the work before it:

  default      only when the context-parallel size is > 1 (a CP-only cost: an A/B of SLIME_DIR against
               OUT_DIR at CP=1,2 must report the candidate's CP overhead LARGER)
  --every-cp   at every CP (a CP-neutral cost: the A/B's ratio of ratios must stay at 1, and the CP=1
               row shows the change; on one GPU, `--cp 1` alone shows it as the candidate/base ratio)

Calibrate S from a base run: actor_train's seconds per step over the micro-batches per step per rank
(e.g. 0.34 s and 4 micro-batches: S = 0.15 * 0.34 / 4 = 0.013 for a 15 % cost). The waiting is time
the step pays, as real work would be; it is written as code in the copy (the A/B's two revisions must
run the same command and environment). Standard library only; SLIME_DIR is left as it is.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

LOSS = Path("slime/backends/megatron_utils/loss.py")
MARK = "# cpverify known effect"


def wrapper(seconds: float, every_cp: bool) -> str:
    condition = "True" if every_cp else "mpu.get_context_parallel_world_size() > 1"
    return f'''

{MARK}: {seconds} s per loss_function call {"at every CP" if every_cp else "when CP > 1"}
_cpverify_loss_function = loss_function


def loss_function(*args, **kwargs):  # noqa: F811
    if {condition}:
        import time

        torch.cuda.synchronize()
        time.sleep({seconds!r})
    return _cpverify_loss_function(*args, **kwargs)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("slime_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seconds", type=float, required=True, help="seconds per loss_function call")
    parser.add_argument("--every-cp", action="store_true", help="at every CP (CP-neutral), not only CP > 1")
    args = parser.parse_args()
    source = args.slime_dir / LOSS
    text = source.read_text(encoding="utf-8")
    if "\ndef loss_function(" not in text or MARK in text:
        raise SystemExit(f"{source}: no loss_function to wrap, or wrapped already")
    if args.out_dir.exists():
        raise SystemExit(f"{args.out_dir} exists: give a new directory")
    shutil.copytree(args.slime_dir, args.out_dir, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    (args.out_dir / LOSS).write_text(text + wrapper(args.seconds, args.every_cp), encoding="utf-8")
    print(f"{args.out_dir}: loss_function waits {args.seconds} s {'at every CP' if args.every_cp else 'when CP > 1'}")


if __name__ == "__main__":
    main()
