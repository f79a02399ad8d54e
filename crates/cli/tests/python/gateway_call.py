"""One tool call to a team gateway with a key, through the official MCP Python SDK (issue 28
item 3's tests drive the gateway with it call by call, between sign-ins and sign-outs).

Usage: gateway_call.py URL KEY TOOL [JSON_ARGUMENTS]

Prints one JSON line: {"is_error": bool, "text": "the result's text"}.
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, key, tool = sys.argv[1:4]
    arguments = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=90) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool(tool, arguments)
            said = "\n".join(getattr(block, "text", "") for block in result.content)
            print(json.dumps({"is_error": bool(result.is_error), "text": said}), flush=True)


anyio.run(main)
