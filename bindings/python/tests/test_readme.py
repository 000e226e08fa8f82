"""Every ```python block of bindings/python/README.md runs, as a reader would run it.

Each block is executed once, in a fresh namespace holding only ``nodes`` (the URLs of three
redis-server nodes started for that block alone, as the README's Quickstart says), with its
standard output captured; the asyncio block's ``asyncio.run`` runs outside any event loop, as
in a script. A block must define or import everything else itself. After it, no lock key may
be left on any node. Tracebacks point at README lines; a block that hangs fails after
``BLOCK_LIMIT_S``.

Every block needs an entry in ``CHECKS`` (keyed by its section heading), which says what it
must print or leave behind, and may have one in ``SETUPS`` (what the nodes must look like
first, e.g. two flushed nodes for the restart-quarantine block). A block without an entry, an
entry without a block, or a python fence this parser does not see (an indented one, ```py)
fails ``test_every_python_block_is_run``, so no block goes unrun.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
from dataclasses import replace
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import pytest

from conftest import PACKAGE_ROOT, first_contact
from redis_nodes import Cluster, wait_until

README = os.path.join(PACKAGE_ROOT, "README.md")

#: How long a block may run before it fails (e.g. a server that serves forever): far above
#: what any block needs (about a second), so only a hang reaches it.
BLOCK_LIMIT_S = 120


class BlockTimeout(Exception):
    """Raised on the main thread, by SIGALRM, in a block that ran past ``BLOCK_LIMIT_S``."""


class Block(NamedTuple):
    id: str  # the section heading, "#2", "#3"… for a second block under the same heading
    line: int  # the README line of the block's first line of code
    code: str


def readme_blocks() -> List[Block]:
    """The README's ```python blocks (fences at the start of a line), in order."""
    with open(README, encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks: List[Block] = []
    heading = "(top)"
    seen: Dict[str, int] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            info = line[3:].strip()
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            assert end < len(lines), f"README.md:{i + 1}: unclosed code fence"
            if info == "python":
                seen[heading] = seen.get(heading, 0) + 1
                bid = heading if seen[heading] == 1 else f"{heading} #{seen[heading]}"
                blocks.append(Block(bid, i + 2, "\n".join(lines[i + 1 : end]) + "\n"))
            i = end + 1
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        i += 1
    return blocks


def run_block(
    block: Block, nodes: List[str], extra: Optional[Dict[str, Any]] = None
) -> "tuple[str, Dict[str, Any]]":
    """Runs ``block`` in a fresh namespace with only ``nodes`` (and ``extra``); returns what it
    printed and its namespace."""
    env: Dict[str, Any] = {"__name__": "__readme__", "nodes": list(nodes), **(extra or {})}
    # Blank lines in front, so that the line numbers of a traceback are the README's.
    code = compile("\n" * (block.line - 1) + block.code, README, "exec")
    out = io.StringIO()

    def too_long(signum: int, frame: Any) -> None:
        raise BlockTimeout(f"README block {block.id!r} ran past {BLOCK_LIMIT_S} s")

    # On the main thread, as a reader's script runs (it is where the binding keeps waits
    # interruptible); a hang is cut short by an exception raised from SIGALRM's handler.
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, BLOCK_LIMIT_S)
    try:
        with contextlib.redirect_stdout(out):
            exec(code, env)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return out.getvalue(), env


def lock_keys(c: Cluster) -> List[bytes]:
    """Every key on every node but the library's own bookkeeping (the restart-quarantine
    marker, the fencing counters and the leader records, which never expire)."""
    keys: List[bytes] = []
    for s in c.servers:
        for k in s.command("KEYS", "*"):
            if k != b"redlock-marker" and not k.startswith((b"redlock-fence:", b"redlock-leader:")):
                keys.append(k)
    return keys


# ---- what each block must print or leave ----


def check_quickstart(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out == "", out  # nothing was contended
    value, fence = env["store"].rows["account:7"]
    assert value == 150 and fence >= 2, env["store"].rows  # both fenced writes accepted
    assert env["mgr"].closed


def check_waiting(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out.splitlines() == ["gave up: cancelled"], out


def check_asyncio(out: str, env: Dict[str, Any], c: Cluster) -> None:
    lines = out.splitlines()
    assert len(lines) == 3 and re.fullmatch(r"held for \d+ ms more", lines[0]), lines
    assert lines[1] in ("turns: ['a', 'b']", "turns: ['b', 'a']"), lines
    assert lines[2] == "gave up waiting", lines


def setup_quarantine(c: Cluster) -> None:
    # The cluster in use (every node has its marker), then two of three nodes lose their
    # keyspace: a new manager finds them without a marker (NO_MARKER) and no quorum counts.
    first_contact(c)
    for s in c.servers[:2]:
        s.flushall()


def check_quarantine(out: str, env: Dict[str, Any], c: Cluster) -> None:
    lines = out.splitlines()
    # Always the except branch: node 2 alone cannot make a quorum of 2. Which flushed nodes
    # the attempt heard from before it was decided depends on timing: 0 to 2 lines follow.
    assert lines and lines[0].startswith("unavailable: "), out
    for line in lines[1:]:
        m = re.fullmatch(r"([01]) NO_MARKER (\d+)", line)
        assert m and 0 < int(m.group(2)) <= 10_000, out
    assert env["mgr"].closed


def check_tls(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out in ("locked over TLS on 2 nodes\n", "locked over TLS on 3 nodes\n"), out
    assert env["mgr"].closed


def check_metrics(out: str, env: Dict[str, Any], c: Cluster) -> None:
    # The scrape saw the one lock the block took.
    assert "'redlock_acquire_total{result=\"granted\"} 1'" in out, out
    assert env["mgr"].closed


def check_holders(out: str, env: Dict[str, Any], c: Cluster) -> None:
    lines = out.splitlines()
    assert len(lines) == 7, out
    assert lines[0] == "False" and lines[1] == "True True True" and lines[6] == "False", out
    m = re.fullmatch(r"held by (\S+) for (\d+) ms, (\d+) ms left", lines[2])
    assert m and m.group(1) == env["me"] and 0 < int(m.group(3)) <= 30_000, out
    # The lock returned once a quorum granted: the last node's grant may not have landed yet.
    nodes = [re.fullmatch(r"([012]) (HELD LOCK|FREE NONE)", line) for line in lines[3:6]]
    assert all(nodes) and [n.group(1) for n in nodes] == ["0", "1", "2"], out
    assert sum(n.group(2) == "HELD LOCK" for n in nodes) >= 2, out


def check_shared(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out.splitlines() == [
        "True", "SHARED", "readers hold it", "writer in, shared: False"
    ], out  # fmt: skip
    # Each unlocked (then closed) by the timer's thread, which may still be closing the last.
    wait_until(lambda: all(lk.closed for lk in env["readers"]), what="the readers closed")
    assert env["writer"].closed and env["mgr"].closed


def check_fair(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out.splitlines() == [
        "True None",
        "busy",
        "next in line: True",
        "invalid input: a fair lock is neither reentrant nor shared: leave out owner and "
        "shared, or fair",
    ], out
    assert env["lk"].closed and env["nxt"].closed and env["mgr"].closed


def check_many(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out.splitlines() == [
        "holding ['account:1', 'account:2']", "busy; account:1 was not kept either", "False"
    ], out  # fmt: skip
    assert env["mgr"].closed


def check_semaphores(out: str, env: Dict[str, Any], c: Cluster) -> None:
    lines = out.splitlines()
    assert lines[:3] == [
        "[(0, 2), (1, 2)]", "both permits held", "got the freed slot: True"
    ], out  # fmt: skip
    # The count recorded with b's hold; on how many nodes the refusal counted it depends on
    # which answered before the decision (b's hold may not have landed on the last one).
    assert len(lines) == 4 and re.fullmatch(
        r"invalid input: this semaphore has 2 permits on [23] of 3 nodes, and this call "
        r"named 3: .*",
        lines[3],
    ), out
    assert env["release"].is_alive() is False
    assert all(lk.closed for lk in (env["a"], env["b"], env["c"])) and env["mgr"].closed


def check_election(out: str, env: Dict[str, Any], c: Cluster) -> None:
    assert out.splitlines() == [
        "b'10.0.0.7:80'", "someone else leads", "b'10.0.0.7:81'", "higher term: True",
        "b'10.0.0.8:80'", "True",
    ], out  # fmt: skip
    assert not env["observer"].is_alive() and env["leadership"].lease.closed
    assert env["mgr"].closed


CHECKS: Dict[str, Callable[[str, Dict[str, Any], Cluster], None]] = {
    "Quickstart": check_quickstart,
    "Waiting, cancelling and Ctrl-C": check_waiting,
    "asyncio": check_asyncio,
    "Shared (read) locks": check_shared,
    "Fair lock": check_fair,
    "Several resources at once": check_many,
    "Semaphores": check_semaphores,
    "Leader election": check_election,
    "Restart quarantine": check_quarantine,
    "TLS": check_tls,
    "Metrics": check_metrics,
    "Who holds a lock": check_holders,
}

SETUPS: Dict[str, Callable[[Cluster], None]] = {
    "Restart quarantine": setup_quarantine,
}

#: Blocks run against nodes that serve TLS only and require a client certificate; their
#: namespace also holds the PEM files' paths: ``ca_file``, ``client_cert``, ``client_key``.
TLS_BLOCKS = {"TLS"}


# ---- the tests ----


def test_every_python_block_is_run():
    blocks = readme_blocks()
    with open(README, encoding="utf-8") as f:
        text = f.read()
    # Every python-looking fence, wherever it is, is one this parser runs.
    fences = re.findall(r"(?m)^[ \t]*(?:```|~~~)[ \t]*(?:py|python3?|pycon)\b.*$", text)
    assert len(fences) == len(blocks), (
        f"{len(fences)} python fences in README.md, {len(blocks)} run: keep every python block "
        f"at the start of a line, opened with exactly ```python: {fences}"
    )
    ids = [b.id for b in blocks]
    assert len(ids) >= 8, ids
    assert set(ids) == set(CHECKS), (
        f"blocks without a check: {sorted(set(ids) - set(CHECKS))}; "
        f"checks without a block: {sorted(set(CHECKS) - set(ids))}"
    )
    assert set(SETUPS) <= set(ids), sorted(set(SETUPS) - set(ids))
    assert TLS_BLOCKS <= set(ids), sorted(TLS_BLOCKS - set(ids))


@pytest.mark.parametrize("block", readme_blocks(), ids=lambda b: b.id)
def test_readme_block_runs(block: Block, make_cluster, tls_certs):
    extra: Dict[str, Any] = {}
    if block.id in TLS_BLOCKS:
        c = make_cluster(3, replace(tls_certs, auth_clients=True))
        extra = {
            "ca_file": tls_certs.ca,
            "client_cert": tls_certs.client_cert,
            "client_key": tls_certs.client_key,
        }
    else:
        c = make_cluster(3)
    setup = SETUPS.get(block.id)
    if setup is not None:
        setup(c)
    out, env = run_block(block, c.urls, extra)
    CHECKS[block.id](out, env, c)
    # Everything the block locked it released: every key gone from every node (an unlock
    # returns once a quorum confirmed, so the last node's delete may land just after).
    try:
        wait_until(lambda: not lock_keys(c), what=f"no lock key left by the {block.id!r} block")
    except AssertionError as e:
        # Which node kept which key, and for how long still (its TTL says when it was set).
        left = [
            (i, k, s.command("PTTL", k))
            for i, s in enumerate(c.servers)
            for k in s.command("KEYS", "*")
            if k in lock_keys(c)
        ]
        raise AssertionError(f"{e}: (node, key, PTTL ms) {left}") from None
