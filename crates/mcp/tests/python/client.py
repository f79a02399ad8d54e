"""Drives `toolgate serve` with the official MCP Python SDK.

Usage: client.py stdio MODE TOOLGATE WORKSPACE
       client.py http MODE URL TOKEN

MODE is "legacy" (initialize handshake), "2026-07-28" (per-request _meta, no handshake) or
"auto" (probe with server/discover, which must pick 2026-07-28).
Prints one line per check passed and exits non-zero with a message on the first failure.
"""

from __future__ import annotations

import re
import subprocess
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# An unusual duration, so the host-side check below finds only the command this script started.
LONG_SLEEP = "sleep 31.713"


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}", flush=True)


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def exercise(client: Client, mode: str, workspace: str | None) -> None:
    check(client.protocol_version == ("2026-07-28" if mode == "2026-07-28" else client.protocol_version),
          f"protocol version {client.protocol_version}")
    if mode == "legacy":
        check(client.protocol_version < "2026-07-28", "legacy mode negotiated a handshake-era version")
    if mode == "auto":
        check(client.protocol_version == "2026-07-28", "server/discover negotiated 2026-07-28")
    tools = (await client.list_tools()).tools
    names = {t.name for t in tools}
    if "sleep" in names:
        await exercise_long(client)
        return
    check({"echo", "time", "json"} <= names, f"tools/list includes echo, time, json (got {sorted(names)})")
    echo = next(t for t in tools if t.name == "echo")
    check(echo.annotations is not None and echo.annotations.read_only_hint is True, "echo is annotated read-only")
    check(echo.annotations.destructive_hint is False, "echo is annotated non-destructive")

    result = await client.call_tool("echo", {"message": "hello from python"})
    check(not result.is_error and "hello from python" in text_of(result), "echo round trip")

    time_tool = next(t for t in tools if t.name == "time")
    check(time_tool.output_schema is not None, "time declares an outputSchema")
    result = await client.call_tool("time", {"operation": "now"})
    check(not result.is_error and result.structured_content is not None,
          f"time returns structuredContent: {result.structured_content}")

    result = await client.call_tool("json", {"operation": "query", "data": {"a": [1, 2]}, "path": "$.a[1]"})
    check(not result.is_error and "2" in text_of(result), f"json query works: {text_of(result)!r}")

    # A tool error is a result with isError, not a protocol error.
    result = await client.call_tool("echo", {"nope": 1})
    check(result.is_error and "invalid parameters" in text_of(result), "invalid params come back as isError result")

    # An unknown tool is a protocol error (-32602).
    try:
        await client.call_tool("no_such_tool", {})
        check(False, "unknown tool should raise")
    except MCPError as e:
        check(e.code == -32602 and "unknown tool" in str(e), f"unknown tool is protocol error {e.code}")

    check({"read", "exec"} <= names, "tools/list includes the file and runtime tools")
    if workspace is not None:
        result = await client.call_tool("read", {"path": "hello.txt"})
        check(not result.is_error and "hello file" in text_of(result), "read a workspace file")
    result = await client.call_tool("exec", {"command": "echo from-exec"})
    check(not result.is_error and "from-exec" in text_of(result) and "sandbox:" in text_of(result),
          "exec runs a command in the sandbox")

    await exercise_ids(client)
    # The agent tools are always served; their ids exist only where agents are configured.
    agents = await client.call_tool("agents_list", {})
    if '"name"' in text_of(agents):
        await exercise_agent_ids(client)

    # Cancel a long command: the client gives up, and the process must be gone from the host.
    with anyio.move_on_after(1.5):
        await client.call_tool("exec", {"command": LONG_SLEEP})
    gone = False
    for _ in range(100):
        if subprocess.run(["pgrep", "-f", LONG_SLEEP], capture_output=True).returncode != 0:
            gone = True
            break
        await anyio.sleep(0.1)
    check(gone, "a cancelled exec leaves no process behind")


async def exercise_ids(client: Client) -> None:
    """Ids toolgate mints (lock tokens, process ids) reach the model intact, in the text and in
    the facts for programs (`_meta`) alike, and the id read from the text works in the next call."""
    result = await client.call_tool("lock_paths", {"globs": ["ids-check/**"], "ttl_ms": 60000})
    text = text_of(result)
    found = re.search(r"Token: (\S+) ", text)
    check(not result.is_error and found is not None and "REDACTED" not in text, f"lock_paths shows its token: {text!r}")
    token = found.group(1)
    facts = (result.meta or {}).get("io.toolgate/result") or {}
    check(result.structured_content is None and facts.get("token") == token,
          f"text only, and the token in _meta is the text's: {result.structured_content} {result.meta}")
    result = await client.call_tool("unlock_paths", {"tokens": [token]})
    check(not result.is_error and "REDACTED" not in text_of(result), f"unlock_paths takes it: {text_of(result)!r}")

    result = await client.call_tool("exec", {"command": "sleep 30.419", "background": True})
    text = text_of(result)
    found = re.search(r"background process (\S+) ", text)
    check(not result.is_error and found is not None and "REDACTED" not in text, f"exec shows the process id: {text!r}")
    pid = found.group(1)
    result = await client.call_tool("process", {"action": "poll", "id": pid})
    check(not result.is_error and "REDACTED" not in text_of(result), f"process poll takes it: {text_of(result)!r}")
    result = await client.call_tool("process", {"action": "list"})
    check(pid in text_of(result), f"process list shows it as it is: {text_of(result)!r}")
    result = await client.call_tool("process", {"action": "kill", "id": pid})
    check(not result.is_error, f"process kill takes it: {text_of(result)!r}")


async def exercise_agent_ids(client: Client) -> None:
    """The agent tools' ids (sub-agents, sessions, team tasks): shown intact, usable next."""
    result = await client.call_tool("subagents", {"action": "spawn", "task": "look around", "label": "ids"})
    text = text_of(result)
    found = re.search(r'"id": "([0-9a-f]{32})"', text)
    check(not result.is_error and found is not None and "REDACTED" not in text, f"subagents spawn shows its id: {text!r}")
    sub_id = found.group(1)
    check(result.structured_content is None, f"untrusted output is text only: {result.structured_content}")
    result = await client.call_tool("subagents", {"action": "list"})
    check(sub_id in text_of(result) and "REDACTED" not in text_of(result), f"subagents list: {text_of(result)!r}")
    result = await client.call_tool("subagents", {"action": "cancel", "id": sub_id})
    # Its model is unreachable, so it may have failed already: either way the id was found.
    recognised = not result.is_error or f"task `{sub_id}` already finished" in text_of(result)
    check(recognised, f"subagents cancel takes the id: {text_of(result)!r}")

    result = await client.call_tool("sessions_list", {})
    text = text_of(result)
    sessions = re.findall(r'"id": "([0-9a-f]{32})"', text)
    check(not result.is_error and sessions and "REDACTED" not in text, f"sessions_list shows ids: {text!r}")
    result = await client.call_tool("sessions_history", {"session_id": sessions[0]})
    check(not result.is_error and "REDACTED" not in text_of(result), f"sessions_history takes it: {text_of(result)!r}")
    result = await client.call_tool("session_status", {"session_id": sessions[0]})
    check(not result.is_error and sessions[0] in text_of(result), f"session_status takes it: {text_of(result)!r}")

    result = await client.call_tool("team_tasks", {"action": "create", "subject": "write the parser"})
    text = text_of(result)
    found = re.search(r'"id": (\d+)', text)
    check(not result.is_error and found is not None, f"team_tasks create shows the task id: {text!r}")
    task = int(found.group(1))
    result = await client.call_tool("team_tasks", {"action": "claim", "task_id": task})
    check(not result.is_error, f"team_tasks claim takes it: {text_of(result)!r}")
    result = await client.call_tool("team_tasks", {"action": "complete", "task_id": task, "result": "done"})
    check(not result.is_error and "completed" in text_of(result), f"team_tasks complete takes it: {text_of(result)!r}")


async def exercise_long(client: Client) -> None:
    """Progress and cancellation, against the test server of crates/mcp/tests/it/peer.rs (tool `sleep`)."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool("sleep", {"ms": 300}, progress_callback=on_progress)
    check(not result.is_error, "a short sleep completes")
    check(len(seen) >= 2 and seen[-1][0] >= seen[0][0], f"progress notifications arrived: {seen}")

    with anyio.move_on_after(1.0):
        await client.call_tool("sleep", {"ms": 30000})
    print("info: abandoned a 30 s sleep after 1 s", flush=True)
    result = await client.call_tool("echo", {"message": "after cancel"})
    check(not result.is_error and "after cancel" in text_of(result), "server keeps serving after a cancelled call")


async def main() -> None:
    transport, mode = sys.argv[1], sys.argv[2]
    with anyio.fail_after(60):
        if transport == "stdio":
            toolgate, workspace = sys.argv[3], sys.argv[4]
            params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
            async with Client(params, mode=mode) as client:
                await exercise(client, mode, workspace)
        else:
            url, token = sys.argv[3], sys.argv[4]
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                    await exercise(client, mode, None)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
