"""Grants and access requests on a team gateway (issue 28, items 4 and 5).

Usage: gateway_grants.py URL TOOLGATE WORKSPACE KEY_BOB KEY_ANN KEY_ANN_CI KEY_LEE

Driven through the official MCP Python SDK with bearer keys, the administration through the real
`toolgate admin` between steps, on one server that is never restarted: Bob without a grant
neither sees nor calls `time` and is told to request it; he requests it (twice: one request);
the operator approves and Bob's next call works; the grant revoked, Bob's next call is refused;
Ann's agent has a narrower grant than Ann; only the admin sees and uses the `gateway` tool; odd
names are refused; a grant written into Bob's own workspace database does not count. Prints one
`ok:` line per check; exits non-zero with `FAILED:` on the first that does not hold.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def check(cond: bool, what: str, detail: object = "") -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}\n{detail}")
    print(f"ok: {what}", flush=True)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


URL, TOOLGATE, WS, BOB, ANN, ANN_CI, LEE = sys.argv[1:8]


def admin(*args: str, ws: str = WS) -> str:
    out = subprocess.run([TOOLGATE, "--workspace", ws, "admin", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAILED: admin {args}: {out.stderr}")
    return out.stdout.strip()


@contextlib.asynccontextmanager
async def session(key: str):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
            Client(streamable_http_client(URL, http_client=http)) as client:
        yield client


async def names(client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def main() -> None:
    with anyio.fail_after(120):
        async with session(BOB) as bob:
            tools = await names(bob)
            check("echo" in tools and "request_access" in tools, "bob lists the default tools and request_access",
                  sorted(tools))
            check("time" not in tools and "read" not in tools and "gateway" not in tools,
                  "and not what he was not granted", sorted(tools))
            refused = await bob.call_tool("time", {"operation": "now"})
            check(refused.is_error and "request_access" in text(refused) and "no grant" in text(refused),
                  "a call of an ungranted tool says what to request", text(refused))
            try:
                alias = await bob.call_tool("bash", {"command": "date"})
                refused_alias, said = alias.is_error, text(alias)
            except MCPError as e:  # an unknown tool is a protocol error
                refused_alias, said = True, str(e)
            check(refused_alias and "Tue" not in said, "another spelling of a tool does not slip past the grants",
                  said)

            filed = await bob.call_tool("request_access", {"tool": "time", "reason": "to stamp my notes"})
            check(not filed.is_error and "filed" in text(filed), "bob requests time", text(filed))
            again = await bob.call_tool("request_access", {"tool": "time", "reason": "please"})
            check(not again.is_error and "pending already" in text(again), "asking again is the same request",
                  text(again))
            for odd in ("<script>alert(1)</script>", "../../etc/passwd", "time\nx"):
                bad = await bob.call_tool("request_access", {"tool": odd, "reason": "x"})
                check(bad.is_error, f"an odd tool name is refused: {odd!r}", text(bad))
            admin_tool = await bob.call_tool("gateway", {"action": "status"})
            check(admin_tool.is_error and "admin" in text(admin_tool), "bob may not use the gateway tool",
                  text(admin_tool))

            pending = [json.loads(line) for line in admin("access", "list", "--json").splitlines()]
            check(len(pending) == 1 and pending[0]["user"] == "bob" and pending[0]["tool"] == "time",
                  "the admin sees one pending request", pending)
            # A grant written into Bob's own workspace database (his tools can reach it) is not
            # the gateway's: it does not count.
            admin("user", "add", "bob", ws=f"{WS}/users/bob")
            admin("grant", "add", "--to", "bob", "--tool", "time", ws=f"{WS}/users/bob")
            still = await bob.call_tool("time", {"operation": "now"})
            check(still.is_error, "a grant in another workspace's database does not apply", text(still))

            approved = admin("access", "approve", str(pending[0]["id"]), "--message", "ok")
            check("approved" in approved, "the operator approves", approved)
            now = await bob.call_tool("time", {"operation": "now"})
            check(not now.is_error, "bob's next call works, no restart", text(now))
            check("time" in await names(bob), "and bob now lists time")
            status = await bob.call_tool("request_access", {"status": True})
            check("approved" in text(status), "bob sees his request approved", text(status))

            grant_id = next(g["id"] for g in map(json.loads, admin("grant", "list", "--to", "bob", "--json")
                                                 .splitlines()) if g["request"] == pending[0]["id"])
            admin("grant", "revoke", str(grant_id))
            revoked = await bob.call_tool("time", {"operation": "now"})
            check(revoked.is_error and "no grant" in text(revoked), "a revoked grant applies on the next request",
                  text(revoked))

        async with session(ANN) as ann, session(ANN_CI) as ci:
            mine, its = await names(ann), await names(ci)
            check({"read", "time"} <= mine, "ann has her grants", sorted(mine))
            check("time" in its and "read" not in its, "her agent's grant is narrower", sorted(its))
            read = await ci.call_tool("read", {"path": "x.txt"})
            check(read.is_error and "no grant" in text(read), "and her agent may not call read", text(read))

        async with session(LEE) as lee:
            check("gateway" in await names(lee), "the admin lists the gateway tool")
            status = await lee.call_tool("gateway", {"action": "status"})
            check(not status.is_error and '"users":3' in text(status).replace(" ", ""), "gateway status",
                  text(status))
            config = await lee.call_tool("gateway", {"action": "config_get"})
            check(not config.is_error and "gateway" in text(config), "config_get", text(config)[:300])
            invalid = await lee.call_tool("gateway", {"action": "config_validate", "patch": "[nope]\nx = 1"})
            check(invalid.is_error and "nope" in text(invalid), "an invalid patch is refused", text(invalid))
    print("all checks passed", flush=True)


anyio.run(main)
