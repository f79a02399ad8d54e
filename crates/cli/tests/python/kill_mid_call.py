"""Makes one `exec` call on `toolgate serve` and waits to be killed (the kill -9 tests in
crates/cli/tests/it/kill.rs).

Usage: kill_mid_call.py stdio TOOLGATE WORKSPACE
       kill_mid_call.py http URL TOKEN

The call's parameters come as JSON in the environment variable KILL_PARAMS (not on the command
line: the test looks for a marker in every process's command line). Prints "calling" when the
call is sent and how it ended if it ever does (a background call returns at once), then
sleeps: the test kills toolgate with SIGKILL, then this script.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def run(client: Client) -> None:
    params = json.loads(os.environ["KILL_PARAMS"])
    print("calling", flush=True)
    try:
        result = await client.call_tool("exec", params)
        print(f"returned: {result}", flush=True)
    except Exception as e:  # the server was killed mid-call
        print(f"failed: {e!r}", flush=True)
    await anyio.sleep(3600)


async def main() -> None:
    transport = sys.argv[1]
    if transport == "stdio":
        toolgate, workspace = sys.argv[2], sys.argv[3]
        args = ["--workspace", workspace, "--approval", "never", "serve"]
        # The whole environment (TMPDIR included: the test watches the sandbox's folder there).
        params = StdioServerParameters(command=toolgate, args=args, env=dict(os.environ))
        async with Client(params, mode="legacy") as client:
            await run(client)
    else:
        url, token = sys.argv[2], sys.argv[3]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=None) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                await run(client)


if __name__ == "__main__":
    anyio.run(main)
