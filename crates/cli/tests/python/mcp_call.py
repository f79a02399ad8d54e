"""One `tools/call` by the official MCP Python SDK (handshake era, no elicitation: a call that
needs approval waits in the server's inbox) over Streamable HTTP.

Usage: mcp_call.py URL TOKEN TOOL ARGUMENTS_JSON

Prints one JSON report on its last line: `{"is_error": bool, "text": "..."}`.
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, token, tool, arguments = sys.argv[1:5]
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=110) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                result = await client.call_tool(tool, json.loads(arguments))
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    print(json.dumps({"is_error": bool(result.is_error), "text": text}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
