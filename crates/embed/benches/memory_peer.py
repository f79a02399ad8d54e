"""The memory benchmark's peer: @modelcontextprotocol/server-memory, driven over MCP stdio by
the official MCP Python SDK (the venv `cargo xtask deps` installs).

Usage: python memory_peer.py SPEC.json. SPEC holds the server command, its memory file, the
notes as entities (name, observations), the labelled (entity name, question) pairs and the timed
queries. Prints one JSON line: indexing time, recall@5 and query latencies in milliseconds.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(result, *names):
    """A result field, whichever spelling this SDK version uses."""
    for name in names:
        if hasattr(result, name):
            return getattr(result, name)
    return None


def entities_of(result):
    """The entity names a search_nodes result lists, in the server's order."""
    data = field(result, "structured_content", "structuredContent")
    if not data:
        text = "".join(c.text for c in result.content if getattr(c, "text", None))
        data = json.loads(text) if text else {}
    return [e["name"] for e in data.get("entities", [])]


async def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    env = dict(os.environ, MEMORY_FILE_PATH=spec["memory_file"])
    params = StdioServerParameters(command=spec["server"][0], args=spec["server"][1:], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            notes = spec["notes"]
            start = time.perf_counter()
            for i in range(0, len(notes), 500):
                batch = [
                    {"name": n["name"], "entityType": "note", "observations": n["observations"]}
                    for n in notes[i : i + 500]
                ]
                result = await session.call_tool("create_entities", {"entities": batch})
                assert not field(result, "is_error", "isError"), result
            indexing = time.perf_counter() - start
            hits = 0
            for name, question in spec["labelled"]:
                result = await session.call_tool("search_nodes", {"query": question})
                if name in entities_of(result)[:5]:
                    hits += 1
            times = []
            for query in spec["queries"]:
                start = time.perf_counter()
                await session.call_tool("search_nodes", {"query": query})
                times.append((time.perf_counter() - start) * 1e3)
            times.sort()
            pick = lambda p: times[round((len(times) - 1) * p)]
            print(
                json.dumps(
                    {
                        "indexing_s": indexing,
                        "hits": hits,
                        "labelled": len(spec["labelled"]),
                        "p50_ms": pick(0.5),
                        "p99_ms": pick(0.99),
                    }
                )
            )


asyncio.run(main())
