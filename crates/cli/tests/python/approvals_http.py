"""A call that needs approval, answered over toolgate's approvals HTTP API.

Usage: approvals_http.py URL TOKEN   (URL is http://HOST:PORT/mcp)

An MCP client without elicitation calls `write` on `AGENTS.md` (an instruction file: writing it
needs approval). While the call waits, this script lists GET /api/approvals, checks the pending
request, and answers it with POST /api/approvals/{id}: first "allow_once" (the call succeeds),
then, for a second call, "deny" (the call comes back as an error result).
"""

from __future__ import annotations

import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}", flush=True)


async def answer_next(api: httpx2.AsyncClient, base: str, decision: str) -> None:
    for _ in range(200):
        listed = (await api.get(f"{base}/api/approvals")).json()["pending"]
        if listed:
            request = listed[0]
            check(request["tool"] == "write", "the pending request names the tool")
            check("AGENTS.md" in (request.get("subject") or "") or "AGENTS.md" in str(request["params"]),
                  "the pending request shows what will be written")
            reply = await api.post(f"{base}/api/approvals/{request['id']}", json={"decision": decision})
            check(reply.status_code == 200, f"POST answered with {decision}")
            return
        await anyio.sleep(0.05)
    raise SystemExit("FAILED: no pending approval appeared")


async def main() -> None:
    url, token = sys.argv[1], sys.argv[2]
    base = url.rsplit("/mcp", 1)[0]
    headers = {"Authorization": f"Bearer {token}"}
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                httpx2.AsyncClient(headers=headers, timeout=30) as api:
            check((await api.get(f"{base}/api/approvals")).json() == {"pending": []}, "nothing pending at start")
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                results = {}

                async def call(key: str, content: str) -> None:
                    results[key] = await client.call_tool("write", {"path": "AGENTS.md", "content": content})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, "first", "allowed\n")
                    await answer_next(api, base, "allow_once")
                check(not results["first"].is_error, "the approved call ran")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, "second", "denied\n")
                    await answer_next(api, base, "deny")
                text = "\n".join(getattr(c, "text", "") for c in results["second"].content)
                check(results["second"].is_error and "not approved" in text, "the denied call is an error result")
    print("all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
