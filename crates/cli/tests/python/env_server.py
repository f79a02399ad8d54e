"""A small MCP server (official Python SDK, stdio) that says how it was started, for the tests of
a team gateway grant's server settings (`config_overrides`).

Tools:
- `mode` (readOnlyHint): `MODE=<$MODE or unset> args=<its arguments as JSON> instance=<a random id made at start>`;
- `nap(seconds)` (readOnlyHint): sleeps, then says so.
"""

from __future__ import annotations

import json
import os
import secrets
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("env-fixture")
# Tells one process from another (each runs in a PID namespace of its own, where its pid is the same).
INSTANCE = secrets.token_hex(8)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def mode() -> str:
    """Says the MODE it was started with, its arguments and which process it is."""
    return f"MODE={os.environ.get('MODE', 'unset')} args={json.dumps(sys.argv[1:])} instance={INSTANCE}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def nap(seconds: float) -> str:
    """Sleeps for `seconds`."""
    await anyio.sleep(seconds)
    return f"slept {seconds} s"


if __name__ == "__main__":
    server.run()
