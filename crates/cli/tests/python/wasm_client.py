"""Drives `toolgate serve` over stdio with the official MCP Python SDK and prints what it saw
of the WASM tools, as one JSON line (checked by crates/cli/tests/it/wasm/mcp.rs).

Usage: wasm_client.py TOOLGATE WORKSPACE
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def outcome(result) -> dict:
    return {"is_error": bool(result.is_error), "text": text_of(result)}


async def main() -> None:
    toolgate, workspace = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
    async with Client(params, mode="legacy") as client:
        tools = (await client.list_tools()).tools
        seen = {}
        for t in tools:
            if t.name.startswith("wasm__"):
                schema = getattr(t, "input_schema", None) or getattr(t, "inputSchema", None)
                annotations = t.annotations
                seen[t.name] = {
                    "description": t.description,
                    "schema": schema,
                    "read_only": getattr(annotations, "read_only_hint", None) if annotations else None,
                }
        report = {
            "tools": seen,
            "echo": outcome(await client.call_tool("wasm__echo", {"text": "hello from the MCP client"})),
            "invalid": outcome(await client.call_tool("wasm__echo", {"text": 5})),
            "spin": outcome(await client.call_tool("wasm__spin", {})),
            "after": outcome(await client.call_tool("wasm__echo", {"text": "still serving"})),
        }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
