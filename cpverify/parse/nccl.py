"""What NCCL's lines say about the run (`nccl` of the parse): its version, the transports its
channels use, the network and the InfiniBand link layer.

  * version: `NCCL INFO NCCL version 2.27.5+cuda12.9` or the bare `NCCL version 2.19.3+cuda12.3`
    -> version "2.27.5", cuda "12.9" (every version a log names is kept in `versions`).
  * transports, from per-channel `... via X` lines, normalised (first seen first, no repeats):
      P2P/CUMEM[/read]    -> "P2P/CUMEM"     P2P/IPC[/read]  -> "P2P/IPC"
      P2P/direct pointer  -> "P2P/direct"    SHM/<anything>  -> "SHM"
      NET/<net>/<dev>     -> "NET/<net>"     NET/<net>/<dev>/GDRDMA -> "NET/<net>/GDRDMA"
    (NET/Socket/0 -> "NET/Socket", NET/IB/3/GDRDMA -> "NET/IB/GDRDMA"); anything else verbatim.
  * network, from `Using network Socket|IB`. "Using network Socket" alone is NOT a TCP fallback
    (healthy single-node NVLink runs print it); only `via NET/Socket` channels are: see
    ParsedLog.tcp_fallback and ParsedLog.nccl_transport_warning().
"""

from __future__ import annotations

import re

from cpverify.parse.records import NcclFacts
from cpverify.terminal import strip_csi
from cpverify.versions import nccl_version

_VIA_CACHE_WORDS = 64  # transport words a block scan skips; a rarer word is read each time it is printed
_VIA = re.compile(r"\bvia (\S+(?: pointer)?)")
# "via X" without its leading space: a pattern starting with the rare "v" scans faster; a match
# not preceded by a space is no channel line (NcclLines.info_line checks).
_VIA_WORD = re.compile(rb"via (\S{1,200})")
_NET_VIA = re.compile(r"^NET/([^/]+?)/\d+(/GDRDMA)?")
_NETWORK = re.compile(r"Using network (\S+(?: \S+)?)\s*$")
_IB_LINK = re.compile(r"NET/IB : Using \[\d+\]\S+?/(RoCE|IB)\b")


def normalise_transport(via: str) -> str:
    """`P2P/IPC/read` -> `P2P/IPC`, `NET/IB/3/GDRDMA` -> `NET/IB/GDRDMA` (see the module doc)."""
    if via.startswith("SHM"):
        return "SHM"
    if via.startswith("P2P/"):
        return "P2P/" + via.split("/")[1].split(" ")[0]
    net = _NET_VIA.match(via)
    if net:
        return f"NET/{net.group(1)}{net.group(2) or ''}"
    return via


class NcclLines:
    """Reads NCCL's lines into `facts`, the parse's `nccl`."""

    def __init__(self, facts: NcclFacts) -> None:
        self.facts = facts
        self.via_seen: set[bytes] = set()  # the block scan (cpverify.parse.scan) skips channel lines of these words

    def info_line(self, line: bytes) -> None:
        """A `NCCL INFO` line, the fast path for NCCL_DEBUG=INFO chatter: only these facts live in such lines."""
        via = _VIA_WORD.search(line, max(line.find(b" via "), 0))
        if via is not None and line[via.start() - 1 : via.start()] != b" ":
            via = None
        if via is not None:
            # Every channel of every communicator prints one: read each distinct transport word once.
            if via.group(1) in self.via_seen:
                return
            if len(self.via_seen) < _VIA_CACHE_WORDS:
                self.via_seen.add(via.group(1))
        if (via is not None or line.find(b"NCCL version") != -1 or line.find(b"Using network") != -1
                or line.find(b"NET/IB : Using") != -1):
            text = line.decode("utf-8", "replace")
            self.fact(strip_csi(text))

    def fact(self, msg: str) -> None:
        """The fact a line (colour codes and prefix removed) states, if any."""
        nccl = self.facts
        if " via " in msg:
            m = _VIA.search(msg)
            if m:
                transport = normalise_transport(m.group(1))
                if transport not in nccl.transports:
                    nccl.transports.append(transport)
        elif "NCCL version" in msg:
            stated = nccl_version(msg)
            if stated:
                version, cuda = stated
                if nccl.version is None:
                    nccl.version, nccl.cuda = version, cuda
                if version not in nccl.versions:
                    nccl.versions.append(version)
        elif "Using network" in msg:
            m = _NETWORK.search(msg)
            if m and nccl.network is None:
                nccl.network = m.group(1)
        elif "NET/IB : Using" in msg:
            m = _IB_LINK.search(msg)
            if m and nccl.ib_link is None:
                nccl.ib_link = m.group(1)
