"""Drives `toolgate serve` over stdio with the official MCP Python SDK: lists the tools, makes
the calls given as JSON, and prints what it saw as one JSON line (checked by
crates/cli/tests/it/agent.rs, `an_mcp_client_runs_toolgate_agents`).

Usage: agent_client.py TOOLGATE WORKSPACE CALLS_JSON   (CALLS_JSON: [[tool, arguments], ...])
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    toolgate, workspace, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
    async with Client(params, mode="legacy") as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        results = []
        for name, arguments in calls:
            r = await client.call_tool(name, arguments)
            text = "\n".join(getattr(c, "text", "") for c in r.content)
            structured = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None)
            results.append({"is_error": bool(r.is_error), "text": text, "structured": structured})
    print(json.dumps({"tools": tools, "results": results}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
