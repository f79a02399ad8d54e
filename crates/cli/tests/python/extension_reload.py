"""Drives `toolgate serve` over stdio with the official MCP Python SDK: installs an MCP server
with `tool_install` (the workspace's `[approval] mode = "never"` lets it run unasked), waits for
the server to reload its configuration and bridge the new server's tools, calls one, removes the
server with `tool_remove` and waits for its tools to go. Prints one JSON line (checked by
crates/cli/tests/it/extension_tools.rs).

Usage: extension_reload.py TOOLGATE WORKSPACE NODE SERVER_SCRIPT
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def names(client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def wait_for(client, present: bool, name: str) -> bool:
    # A hang guard, not a timing assertion.
    for _ in range(600):
        if (name in await names(client)) == present:
            return True
        await anyio.sleep(0.1)
    return False


async def main() -> None:
    toolgate, workspace, node, script = sys.argv[1:5]
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
    async with Client(params, mode="legacy") as client:
        before = "mcp__hot__echo" in await names(client)
        install = await client.call_tool("tool_install", {"name": "hot", "command": node, "args": [script, "stdio"]})
        appeared = await wait_for(client, True, "mcp__hot__echo")
        echo = await client.call_tool("mcp__hot__echo", {"message": "hot reloaded"}) if appeared else None
        listed = await client.call_tool("tool_list", {"kind": "mcp"})
        remove = await client.call_tool("tool_remove", {"name": "hot"})
        gone = await wait_for(client, False, "mcp__hot__echo")
        report = {
            "before": before,
            "install": {"is_error": bool(install.is_error), "text": text_of(install)},
            "appeared": appeared,
            "echo": text_of(echo) if echo else None,
            "list": text_of(listed),
            "remove": {"is_error": bool(remove.is_error), "text": text_of(remove)},
            "gone": gone,
        }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
