"""Approvals over MCP: `toolgate --approval untrusted serve` asks before `write`.

Usage: approval.py MODE TOOLGATE WORKSPACE

- a client that answers elicitation with "allow once" gets the write done;
- a client that declines gets an isError result saying it was not approved;
- a client without elicitation gets an isError result saying what needs approval and how.

MODE "legacy" answers a server-to-client `elicitation/create`; MODE "2026-07-28" answers the
`InputRequiredResult` round trip (the SDK retries the call with the answer).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import Client, StdioServerParameters, types


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}", flush=True)


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def answering(decision: str | None, asked: list[str]):
    async def callback(context, params):
        asked.append(params.message)
        if decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": decision})

    return callback


async def main() -> None:
    mode, toolgate, workspace = sys.argv[1], sys.argv[2], sys.argv[3]
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "--approval", "untrusted", "serve"])
    with anyio.fail_after(60):
        asked: list[str] = []
        async with Client(params, mode=mode, elicitation_callback=answering("allow once", asked)) as client:
            result = await client.call_tool("write", {"path": "approved.txt", "content": "yes\n"})
            check(not result.is_error, f"approved write succeeded: {text_of(result)!r}")
            check(len(asked) == 1 and "write" in asked[0], f"the user was asked once: {asked}")
            check(os.path.exists(os.path.join(workspace, "approved.txt")), "the file was written")

        asked = []
        async with Client(params, mode=mode, elicitation_callback=answering(None, asked)) as client:
            result = await client.call_tool("write", {"path": "declined.txt", "content": "no\n"})
            check(result.is_error and "not approved" in text_of(result), f"declined write refused: {text_of(result)!r}")
            check(not os.path.exists(os.path.join(workspace, "declined.txt")), "the declined file was not written")

        async with Client(params, mode=mode) as client:
            result = await client.call_tool("write", {"path": "unasked.txt", "content": "no\n"})
            check(result.is_error and "needs approval" in text_of(result),
                  f"without elicitation the call is refused with instructions: {text_of(result)!r}")
            check(not os.path.exists(os.path.join(workspace, "unasked.txt")), "the unasked file was not written")
    print("all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
