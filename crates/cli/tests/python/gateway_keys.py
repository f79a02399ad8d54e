"""A team gateway admits MCP clients by their own API keys (issue 28, item 1).

Usage: gateway_keys.py URL KEY_ANN KEY_BOB KEY_ECHO_ONLY

Driven through the official MCP Python SDK, as a team's clients would: each key acts as its own
user (the audit log is checked by the caller afterwards), a key limited to `echo` lists and calls
only that, and a request with no key is refused with a 401 that says how to get one. Prints one
`ok:` line per check; exits non-zero with `FAILED:` on the first that does not hold.
"""

from __future__ import annotations

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


async def main() -> None:
    url, ann, bob, echo_only = sys.argv[1:5]
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=30) as bare:
            r = await bare.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Accept": "application/json, text/event-stream"})
            check(r.status_code == 401 and "toolgate admin key create" in r.text,
                  "no key: a 401 that says how to get one", (r.status_code, r.text))
            r = await bare.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Authorization": "Bearer tg_0000000000000000_" + "0" * 64,
                                         "Accept": "application/json, text/event-stream"})
            check(r.status_code == 401 and "unknown API key" in r.text, "a forged key: 401", (r.status_code, r.text))

        for key, user in ((ann, "ann"), (bob, "bob")):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
                    Client(streamable_http_client(url, http_client=http)) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                check({"echo", "read"} <= tools, f"{user}'s key lists the tools", sorted(tools))
                said = await client.call_tool("echo", {"message": f"from {user}"})
                check(not said.is_error and f"from {user}" in text(said), f"{user}'s key calls echo", text(said))

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {echo_only}"}, timeout=30) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            check(tools == {"echo"}, "a key limited to echo lists echo alone", sorted(tools))
            read = await client.call_tool("read", {"path": "hello.txt"})
            check(read.is_error and "hello file" not in text(read), "and may not call read", text(read))
    print("all checks passed", flush=True)


anyio.run(main)
