"""`build_software` over MCP: drives `toolgate serve` over stdio with the official MCP Python SDK,
answers every approval (elicitation) with "allow once", asks for a WASM tool, then calls it.
Prints what it saw as one JSON line (checked by crates/cli/tests/it/build_software.rs).

Usage: build_software_mcp.py TOOLGATE WORKSPACE PARAMS_JSON TOOL TOOL_PARAMS_JSON
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters, types


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def main() -> None:
    toolgate, workspace, params, tool, tool_params = sys.argv[1:6]
    asked: list[str] = []

    async def allow(context, request):
        asked.append(request.message)
        return types.ElicitResult(action="accept", content={"decision": "allow once"})

    # The server gets this environment (TOOLGATE_JCO), not the SDK's default few variables.
    server = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"], env=dict(os.environ))
    with anyio.fail_after(400):
        async with Client(server, mode="legacy", elicitation_callback=allow) as client:
            built = await client.call_tool("build_software", json.loads(params))
            tools = [t.name for t in (await client.list_tools()).tools]
            called = await client.call_tool(tool, json.loads(tool_params)) if tool in tools else None
    print(json.dumps({
        "build": {"is_error": bool(built.is_error), "text": text_of(built)},
        "listed": tool in tools,
        "call": None if called is None else {"is_error": bool(called.is_error), "text": text_of(called)},
        "asked": asked,
    }), flush=True)


if __name__ == "__main__":
    anyio.run(main)
