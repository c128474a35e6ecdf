"""Summarize a directory of probe logs (from benchmarks/run_probe_device.sh) as Markdown.

    python3 benchmarks/summarize_probe.py LOG_DIR > summary.md

Log names: <arm>.log where arm is cp<N>-s<len>[-variant] (workload) or bw-<variant> (bandwidth).
Ratios pair each CP=N arm with the CP=1 arm of the same length and variant (else the plain one).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cpverify.probe import rules

_TRANSPORT = re.compile(r"via (P2P/\S+|SHM/\S+|NET/\S+)")
_NCCL_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_ARM = re.compile(r"^cp(\d+)-s(\w+?)(?:-(.+))?$")


def read(path: Path) -> dict:
    out = {"perf": [], "checks": [], "busbw": [], "transports": set(), "nccl": None, "summary": None,
           "layout": None, "errors": []}
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if (perf := rules.parse_perf(line)) is not None:
                out["perf"].append(perf[1])
            elif (check := rules.parse_check(line)) is not None:
                out["checks"].append(check)
            elif (bw := rules.parse_busbw(line)) is not None:
                out["busbw"].append(bw)
            elif "cpverify-probe-summary" in line:
                out["summary"] = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            elif "cpverify-layout rank=0" in line:
                out["layout"] = line.strip()
            elif "cpverify probe: error" in line:
                out["errors"].append(line.strip())
            if (t := _TRANSPORT.search(line)) is not None:
                out["transports"].add(t.group(1))
            if out["nccl"] is None and (v := _NCCL_VERSION.search(line)) is not None:
                out["nccl"] = v.group(1)
    return out


def _ms(x: float) -> str:
    return f"{x * 1e3:.2f}"


def main(log_dir: str) -> int:
    logs = {p.stem: read(p) for p in sorted(Path(log_dir).glob("*.log"))}
    arms = {name: data for name, data in logs.items() if _ARM.match(name)}
    print("### Attention fwd+bwd per step, slowest rank (ms)\n")
    print("| arm | steps | compute median | compute IQR/median | step median | CP/CP=1 compute | CP/CP=1 step | peak GiB |")
    print("|---|---|---|---|---|---|---|---|")
    medians = {}
    for name, data in arms.items():
        if data["perf"]:
            c = rules.spread([m["perf/actor_train_time"] for m in data["perf"]])
            s = rules.spread([m["perf/step_time"] for m in data["perf"]])
            medians[name] = (c, s)
    for name, data in arms.items():
        if name not in medians:
            print(f"| {name} | 0 | - | - | - | - | - | - |")
            continue
        cp, length, variant = _ARM.match(name).groups()
        c, s = medians[name]
        ratio_c = ratio_s = "-"
        if cp != "1":
            base = medians.get(f"cp1-s{length}-{variant}") if variant else None
            base = base or medians.get(f"cp1-s{length}")
            if base:
                ratio_c, ratio_s = f"{c.median / base[0].median:.3f}", f"{s.median / base[1].median:.3f}"
        peak = (data["summary"] or {}).get("peak_mem_gib", "-")
        print(f"| {name} | {c.n} | {_ms(c.median)} | {c.iqr_over_median:.1%} | {_ms(s.median)} | {ratio_c} | {ratio_s} | {peak} |")

    print("\n### Correctness gate\n")
    print("| arm | check | status | value | bound |")
    print("|---|---|---|---|---|")
    for name, data in arms.items():
        for ch in data["checks"]:
            print(f"| {name} | {ch['name']} | {ch['status']} | {float(ch['value']):.3g} | {ch['bound']} |")
        for err in data["errors"]:
            print(f"| {name} | (exit) | error | {err[:90]} | |")

    print("\n### NCCL bus bandwidth (GB/s) and transports\n")
    print("| run | op | bytes | busbw | algbw |")
    print("|---|---|---|---|---|")
    for name, data in logs.items():
        for bw in data["busbw"]:
            print(f"| {name} | {bw['op']} | {bw['bytes']} | {bw['busbw_gbps']} | {bw['algbw_gbps']} |")
    print("\n| log | NCCL | transports seen |")
    print("|---|---|---|")
    for name, data in logs.items():
        print(f"| {name} | {data['nccl'] or '-'} | {', '.join(sorted(data['transports'])) or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
