"""Sequential tool calls from the official MCP Python SDK, for `benches/mcp.rs`.

Usage: mcp_client.py SPEC_JSON

SPEC_JSON: {"tool": "echo", "args": {...}, "warmup": W, "rounds": R, "calls": N,
            "targets": [{"name": ..., "command": [argv...]} | {"name": ..., "url": ..., "token": ...|null}]}

Every target is connected first (mode="legacy": the initialize handshake, which every server
measured speaks), warmed up with W calls, then the targets take turns: R rounds of N calls
each, so load on the machine falls on all of them alike. Only the calls are timed (not process
start or the handshake). Prints one JSON object on stdout: {name: [microseconds per call, ...]}.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import AsyncExitStack

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def connect(stack: AsyncExitStack, target: dict) -> Client:
    if "command" in target:
        command = target["command"]
        params = StdioServerParameters(command=command[0], args=command[1:])
        return await stack.enter_async_context(Client(params, mode="legacy"))
    headers = {"Authorization": f"Bearer {target['token']}"} if target.get("token") else {}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=30))
    return await stack.enter_async_context(Client(streamable_http_client(target["url"], http_client=http), mode="legacy"))


async def call(client: Client, tool: str, args: dict) -> float:
    """One call; returns its round trip in microseconds (the check is not timed)."""
    start = time.perf_counter()
    result = await client.call_tool(tool, args)
    took = (time.perf_counter() - start) * 1e6
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content!r}"[:2000])
    return took


async def main() -> None:
    spec = json.loads(sys.argv[1])
    tool, args = spec["tool"], spec["args"]
    out: dict[str, list[float]] = {}
    async with AsyncExitStack() as stack:
        clients = []
        for target in spec["targets"]:
            clients.append((target["name"], await connect(stack, target)))
            out[target["name"]] = []
        for _, client in clients:
            for _ in range(spec["warmup"]):
                await call(client, tool, args)
        for _ in range(spec["rounds"]):
            for name, client in clients:
                for _ in range(spec["calls"]):
                    out[name].append(await call(client, tool, args))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    anyio.run(main)
