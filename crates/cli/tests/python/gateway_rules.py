"""What a grant means on a team gateway (issue 28, items 4 and 6): mode `ask`, argument rules,
sub-agents.

Usage: gateway_rules.py URL TOOLGATE WORKSPACE KEY_ANN

Driven through the official MCP Python SDK with Ann's bearer key, on one server: her grant gives
`exec` only for `git *` (a `git status` is admitted, an `rm -rf x` refused naming the rule and
what to request); her `write` grant is in mode ask (the call waits in the approvals inbox until
another process, `toolgate approvals approve`, decides, then runs); a sub-agent she starts with
`subagents` tries tools beyond her grants (its refusals are checked in the audit log by the Rust
test). Prints one `ok:` line per check; exits non-zero with `FAILED:` on the first that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def check(cond: bool, what: str, detail: object = "") -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}\n{detail}")
    print(f"ok: {what}", flush=True)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


URL, TOOLGATE, WS, ANN = sys.argv[1:5]


def toolgate(*args: str) -> str:
    out = subprocess.run([TOOLGATE, "--workspace", WS, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAILED: toolgate {args}: {out.stderr}")
    return out.stdout.strip()


async def approve_write() -> int:
    """Waits (bounded) for Ann's pending `write` in the inbox and approves it as lee."""
    with anyio.fail_after(60):
        while True:
            pending = [json.loads(line) for line in toolgate("approvals", "pending", "--json").splitlines() if line]
            # `--json` prints one array or one object per line, depending on the version.
            entries = pending[0] if pending and isinstance(pending[0], list) else pending
            mine = [e for e in entries if e.get("tool") == "write"]
            if mine:
                entry = mine[0]
                toolgate("approvals", "approve", str(entry["id"]), "--as", "lee")
                return entry["id"]
            await anyio.sleep(0.1)


async def main() -> None:
    with anyio.fail_after(150):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ANN}"}, timeout=90) as http, \
                Client(streamable_http_client(URL, http_client=http)) as ann:
            tools = {t.name for t in (await ann.list_tools()).tools}
            check({"exec", "write", "subagents"} <= tools and "time" not in tools,
                  "ann lists her granted tools, exec among them (its rule is checked per call)", sorted(tools))

            git = await ann.call_tool("exec", {"command": "git status"})
            check("only for calls matching" not in text(git), "the argument rule admits `git status`", text(git))
            rm = await ann.call_tool("exec", {"command": "rm -rf x"})
            said = text(rm)
            check(rm.is_error and "exec(git *)" in said and "request_access" in said,
                  "`rm -rf x` is refused, naming the rule and what to request", said)
            check(os.path.exists(os.path.join(WS, "x")), "and x is still there")
            for pattern in ("*", "e*", "exec*"):
                wide = await ann.call_tool("request_access", {"tool": pattern, "reason": "everything"})
                check(wide.is_error and "not a pattern" in text(wide),
                      f"a request cannot name a pattern: {pattern!r}", text(wide))

            async with anyio.create_task_group() as tg:
                approved: list[int] = []

                async def approver() -> None:
                    approved.append(await approve_write())

                tg.start_soon(approver)
                wrote = await ann.call_tool("write", {"path": "asked.txt", "content": "approved by lee\n"})
            check(not wrote.is_error, "the ask grant's call ran once another process approved it", text(wrote))
            with open(os.path.join(WS, "asked.txt")) as f:
                check(f.read() == "approved by lee\n", "and wrote the file")
            print(f"approval: {approved[0]}", flush=True)

            run = await ann.call_tool("subagents", {"action": "run", "task": "try everything"})
            check(not run.is_error, "ann's sub-agent ran", text(run))
    print("all checks passed", flush=True)


anyio.run(main)
