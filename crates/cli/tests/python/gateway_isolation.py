"""Two users of one team gateway (per-user workspaces) cannot see or touch each other's
processes, memory, approvals or sessions (issue 28, item 2; files are `gateway_users.py`).

Usage: gateway_isolation.py URL KEY_ANN KEY_BOB TOOLGATE WORKSPACE

The gateway's `[approval] timeout_secs` is short, so a call waiting for approval comes back
"waiting for approval N". Prints one `ok:` line per check; exits non-zero with `FAILED:` on the
first that does not hold.
"""

from __future__ import annotations

import re
import subprocess
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MARK = "ann-7f3a"


def check(cond: bool, what: str, detail: object = "") -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}\n{detail}")
    print(f"ok: {what}", flush=True)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def main() -> None:
    url, ann_key, bob_key, toolgate, workspace = sys.argv[1:6]
    base = url.rsplit("/mcp", 1)[0]
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ann_key}"}, timeout=60) as h_ann, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {bob_key}"}, timeout=60) as h_bob, \
                Client(streamable_http_client(url, http_client=h_ann), mode="legacy") as ann, \
                Client(streamable_http_client(url, http_client=h_bob), mode="legacy") as bob:
            # Processes: ann's background command, by its toolgate id and its host pid.
            wrote = await ann.call_tool("write", {"path": f"{MARK}.txt", "content": "ann's\n"})
            check(not wrote.is_error, "ann writes a file", text(wrote))
            started = await ann.call_tool("exec", {"command": f"echo started {MARK}; sleep 120", "background": True})
            body = text(started)
            found = re.search(r"(tg-proc-[0-9a-f-]+) \(pid (\d+)\)", body)
            check(not started.is_error and found is not None, "ann starts a background process", body)
            proc, pid = found.group(1), found.group(2)
            listed = await bob.call_tool("process", {"action": "list"})
            check(proc not in text(listed) and MARK not in text(listed), "bob's process list lacks ann's", text(listed))
            for action, extra in [("poll", {}), ("log", {}), ("write", {"input": "x\n"}), ("signal", {"signal": "TERM"}),
                                  ("kill", {})]:
                result = await bob.call_tool("process", {"action": action, "id": proc, **extra})
                check(result.is_error and MARK not in text(result), f"bob cannot `process {action}` ann's", text(result))
            # Through the sandbox: the host pid is not in bob's PID namespace, and ann's working
            # folder is not readable through /proc.
            peek = await bob.call_tool("exec", {"command": f"ls /proc/{pid}/cwd/; cat /proc/{pid}/environ; true"})
            check(f"{MARK}.txt" not in text(peek), "bob cannot list ann's folder through /proc", text(peek))
            still = await ann.call_tool("process", {"action": "log", "id": proc})
            check(not still.is_error and f"started {MARK}" in text(still), "ann's process is hers and untouched", text(still))
            alive = await ann.call_tool("process", {"action": "poll", "id": proc})
            check("running" in text(alive), "and still running", text(alive))

            # Memory.
            noted = await ann.call_tool("memory_write", {"content": f"{MARK}: the launch code is banana"})
            check(not noted.is_error, "ann writes a memory note", text(noted))
            for _ in range(50):
                mine = await ann.call_tool("memory_search", {"query": "launch code banana"})
                if MARK in text(mine):
                    break
                await anyio.sleep(0.2)
            check(MARK in text(mine), "ann finds her note", text(mine))
            for tool, params in [("memory_search", {"query": "launch code banana"}), ("memory_tree", {}),
                                 ("memory_read", {"path": "MEMORY.md"}), ("memory_get", {"path": "MEMORY.md"})]:
                result = await bob.call_tool(tool, params)
                check(MARK not in text(result) and "banana" not in text(result), f"bob's {tool} lacks ann's note",
                      text(result))

            # Sessions.
            status = await ann.call_tool("session_status", {})
            session = re.search(r'"id": "([^"]+)"', text(status))
            check(session is not None, "ann's session has an id", text(status))
            theirs = await bob.call_tool("sessions_list", {})
            check(session.group(1) not in text(theirs), "bob's sessions_list lacks ann's session", text(theirs))
            history = await bob.call_tool("sessions_history", {"session_id": session.group(1)})
            check(MARK not in text(history), "bob cannot read ann's session history", text(history))

            # Approvals: ann's waiting call is hers; bob's identical call never resumes from it.
            args = {"path": "AGENTS.md", "content": "ann's instructions\n"}
            waits = await ann.call_tool("write", args)
            entry = re.search(r"waiting for approval (\d+)", text(waits))
            check(entry is not None, "ann's call waits in the inbox", text(waits))
            entry = entry.group(1)
            api = await h_bob.get(f"{base}/api/approvals")
            check(api.status_code == 403 and "ann" not in api.text, "bob cannot list the inbox", api.text)
            approve = subprocess.run([toolgate, "--workspace", workspace, "approvals", "approve", entry, "--as", "lee"],
                                     capture_output=True, text=True, check=False)
            check(approve.returncode == 0, "lee approves it from the CLI", approve.stdout + approve.stderr)
            same = await bob.call_tool("write", args)
            other = re.search(r"waiting for approval (\d+)", text(same))
            check(same.is_error and other is not None and other.group(1) != entry,
                  "bob's identical call waits on an entry of its own, not ann's approved one", text(same))
            ran = await ann.call_tool("write", args)
            check(not ran.is_error, "ann's retry runs on her approval", text(ran))
    print("all checks passed", flush=True)


anyio.run(main)
