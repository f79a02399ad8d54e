"""`message` to an `mcp` channel through `toolgate serve` over stdio (official MCP Python SDK).

Usage: message_mcp.py TOOLGATE WORKSPACE   (the workspace's toolgate.toml has an `mcp` channel `me`)

A handshake-era (legacy) client gets the message as a logging notification; a 2026-07-28 client
gets it when its request opts in with a log level. Prints a JSON report on its last line.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def run(toolgate: str, workspace: str, mode: str, log_level) -> dict:
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
    logs: list[dict] = []

    async def on_log(p) -> None:
        logs.append({"level": str(p.level), "logger": p.logger, "data": p.data})

    kwargs = {"log_level": log_level} if log_level else {}
    async with Client(params, mode=mode, logging_callback=on_log, **kwargs) as client:
        result = await client.call_tool("message", {"to": "me:", "content": f"hello from {mode}"})
        # The notification is sent before the result; give the reader a moment to hand it over.
        with anyio.move_on_after(5):
            while not logs:
                await anyio.sleep(0.05)
        return {"is_error": bool(result.is_error), "text": text_of(result), "logs": logs}


async def main() -> None:
    toolgate, workspace = sys.argv[1], sys.argv[2]
    with anyio.fail_after(60):
        legacy = await run(toolgate, workspace, "legacy", None)
        modern = await run(toolgate, workspace, "auto", "info")
    print(json.dumps({"legacy": legacy, "modern": modern}))


if __name__ == "__main__":
    anyio.run(main)
