"""Two MCP sessions on one `toolgate serve --http` are two sessions (issue 25, item 1).

Usage: two_sessions.py URL TOKEN   (URL is http://HOST:PORT/mcp; the workspace holds hello.txt)

Two clients in the legacy protocol era, each with its own `Mcp-Session-Id`, as two coding agents
on one workspace would be: what one session read does not let the other overwrite a file, a lock
one session holds stops the other, and the loop breaker counts each session's calls alone.
Session tools with no `[agents]` section describe and list each session. Prints one `ok:` line
per check; exits non-zero with `FAILED:` on the first that does not hold.
"""

from __future__ import annotations

import json
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


def as_json(result) -> dict:
    """The JSON object a tool answered with (inside the untrusted-output boundary)."""
    body = text(result)
    return json.loads(body[body.index("{"):body.rindex("}") + 1])


async def main() -> None:
    url, token = sys.argv[1], sys.argv[2]
    headers = {"Authorization": f"Bearer {token}"}
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http_a, \
                httpx2.AsyncClient(headers=headers, timeout=30) as http_b, \
                Client(streamable_http_client(url, http_client=http_a), mode="legacy") as a, \
                Client(streamable_http_client(url, http_client=http_b), mode="legacy") as b:
            # Read before write: A's read does not let B edit.
            read = await a.call_tool("read", {"path": "hello.txt"})
            check(not read.is_error, "session A reads hello.txt", text(read))
            edit = {"path": "hello.txt", "old_string": "hello", "new_string": "HELLO"}
            refused = await b.call_tool("edit", edit)
            check(refused.is_error and "read" in text(refused), "session B may not edit what only A read", text(refused))
            done = await a.call_tool("edit", edit)
            check(not done.is_error, "session A edits what it read", text(done))

            # Locks: A's lock stops B, not A.
            locked = await a.call_tool("lock_paths", {"globs": ["notes/**"]})
            check(not locked.is_error, "session A locks notes/**", text(locked))
            blocked = await b.call_tool("write", {"path": "notes/b.txt", "content": "b\n"})
            check(blocked.is_error and "lock" in text(blocked), "session B may not write under A's lock", text(blocked))
            mine = await a.call_tool("write", {"path": "notes/a.txt", "content": "a\n"})
            check(not mine.is_error, "session A writes under its own lock", text(mine))

            # The loop breaker: each session's identical calls are counted alone (3 run in a row).
            for _ in range(3):
                r = await a.call_tool("ls", {"path": "."})
                check(not r.is_error, "session A lists the workspace", text(r))
            again = await a.call_tool("ls", {"path": "."})
            check(again.is_error, "session A's fourth identical call is refused", text(again))
            other = await b.call_tool("ls", {"path": "."})
            check(not other.is_error, "session B's first identical call runs", text(other))

            # Session tools with no [agents]: each session describes itself, and lists both.
            status_a = as_json(await a.call_tool("session_status", {}))
            status_b = as_json(await b.call_tool("session_status", {}))
            check(status_a["kind"] == "mcp (HTTP session)" and status_a["id"].startswith("mcp-"),
                  "session_status describes the caller's own MCP session", status_a)
            check(status_a["id"] != status_b["id"], "two MCP sessions, two ids", (status_a, status_b))
            check(status_a["calls"] >= 8 and status_b["calls"] >= 2, "each counts its own calls", (status_a, status_b))
            listed = as_json(await a.call_tool("sessions_list", {}))
            ids = {s["id"] for s in listed["mcp_sessions"]}
            check({status_a["id"], status_b["id"]} <= ids, "sessions_list shows both MCP sessions", listed)
            spawn = await a.call_tool("sessions_spawn", {"prompt": "look around"})
            check(spawn.is_error and "[agents.main]" in text(spawn),
                  "sessions_spawn with no model names the config to add", text(spawn))
    print("all checks passed", flush=True)


anyio.run(main)
