"""The durable approvals inbox of `toolgate serve --http`, driven by a real MCP client.

Usage: approvals_inbox.py PHASE URL TOKEN TOOLGATE WORKSPACE

The client (MCP Python SDK, `mode="legacy"`, no elicitation) calls `write` on `AGENTS.md` (an
instruction file: writing it needs approval), so each call waits in the inbox.

- `decide`: a waiting call is approved from another process (`toolgate approvals approve`) and
  completes; a second one is decided twice at once over `/api/approvals` (one 200, one 409).
- `wait`: with `[approval] timeout_secs` short, the call ends "waiting for approval N".
- `retry CONTENT`: the same call again; prints its outcome.
"""

from __future__ import annotations

import subprocess
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}", flush=True)


async def next_pending(api: httpx2.AsyncClient, base: str) -> dict:
    for _ in range(400):
        listed = (await api.get(f"{base}/api/approvals")).json()["pending"]
        if listed:
            return listed[0]
        await anyio.sleep(0.05)
    raise SystemExit("FAILED: no pending approval appeared")


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def main() -> None:
    phase, url, token, toolgate, workspace = sys.argv[1:6]
    base = url.rsplit("/mcp", 1)[0]
    headers = {"Authorization": f"Bearer {token}"}
    with anyio.fail_after(90):
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                httpx2.AsyncClient(headers=headers, timeout=30) as api:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                results = {}

                async def call(key: str, content: str) -> None:
                    results[key] = await client.call_tool("write", {"path": "AGENTS.md", "content": content})

                if phase == "decide":
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call, "first", "approved by the CLI\n")
                        entry = await next_pending(api, base)
                        check(isinstance(entry["id"], int), "entries are numbered")
                        check(entry["tool"] == "write" and entry["identity"]["user"], "the entry names tool and caller")
                        out = subprocess.run(
                            [toolgate, "--workspace", workspace, "approvals", "approve", str(entry["id"]), "--as", "ops"],
                            capture_output=True, text=True, check=False,
                        )
                        check(out.returncode == 0 and "allowed by ops" in out.stdout, f"the CLI approved: {out.stdout}{out.stderr}")
                    check(not results["first"].is_error, "the call approved from another process ran")

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call, "second", "decided twice\n")
                        entry = await next_pending(api, base)
                        statuses = []

                        async def decide(decision: str) -> None:
                            reply = await api.post(f"{base}/api/approvals/{entry['id']}", json={"decision": decision})
                            statuses.append(reply.status_code)

                        async with anyio.create_task_group() as both:
                            both.start_soon(decide, "deny")
                            both.start_soon(decide, "allow_once")
                    check(sorted(statuses) == [200, 409], f"one decision of two at once: {statuses}")
                    again = await api.post(f"{base}/api/approvals/{entry['id']}", json={"decision": "deny"})
                    check(again.status_code == 409 and "first decision stands" in again.json()["error"],
                          "a later decision is a conflict")
                elif phase == "wait":
                    await call("wait", "after the restart\n")
                    print(f"outcome: error={results['wait'].is_error} {text_of(results['wait'])}", flush=True)
                elif phase == "retry":
                    await call("retry", sys.argv[6])
                    print(f"outcome: error={results['retry'].is_error} {text_of(results['retry'])}", flush=True)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
