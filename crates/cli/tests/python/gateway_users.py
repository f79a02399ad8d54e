"""Per-user workspaces (issue 28, item 2): two users of one team gateway cannot see or touch
each other's files, through any tool.

Usage: gateway_users.py URL KEY_ANN KEY_BOB

Ann writes a file in her workspace; Bob, with his own key, tries to reach it by name, by a
relative path out of his workspace, by listing, by search and by a command in the sandbox: each
fails and never shows its contents. Prints one `ok:` line per check; exits non-zero with
`FAILED:` on the first that does not hold.
"""

from __future__ import annotations

import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SECRET = "ann's secret 7f3a"


def check(cond: bool, what: str, detail: object = "") -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}\n{detail}")
    print(f"ok: {what}", flush=True)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def main() -> None:
    url, ann_key, bob_key = sys.argv[1:4]
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ann_key}"}, timeout=60) as h_ann, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {bob_key}"}, timeout=60) as h_bob, \
                Client(streamable_http_client(url, http_client=h_ann)) as ann, \
                Client(streamable_http_client(url, http_client=h_bob)) as bob:
            wrote = await ann.call_tool("write", {"path": "notes/secret.txt", "content": SECRET + "\n"})
            check(not wrote.is_error, "ann writes notes/secret.txt", text(wrote))
            mine = await ann.call_tool("read", {"path": "notes/secret.txt"})
            check(SECRET in text(mine), "ann reads it back", text(mine))

            # (tool, params, whether a listing: then not even the file's name may show)
            attempts = {
                "read by name": ("read", {"path": "notes/secret.txt"}, False),
                "read out of the workspace": ("read", {"path": "../ann/notes/secret.txt"}, False),
                "ls": ("ls", {"path": "."}, True),
                "glob": ("glob", {"pattern": "**/*.txt"}, True),
                "grep": ("grep", {"pattern": "secret 7f3a"}, True),
                "exec cat": ("exec", {"command": "cat ../ann/notes/secret.txt"}, False),
                "exec find": ("exec", {"command": "find .. -name secret.txt -print"}, False),
                "exec ls": ("exec", {"command": "ls -R .."}, True),
            }
            for what, (tool, params, listing) in attempts.items():
                result = await bob.call_tool(tool, params)
                body = text(result)
                # A refusal may repeat the path Bob gave; a listing must not name the file at all.
                found = listing and "secret.txt" in body
                check(SECRET not in body and not found, f"bob cannot reach ann's file: {what}", body[:400])

            # A user's own background work runs in the user's workspace: an event routine of
            # Bob's fires on his echo and writes there (its gate's tasks run).
            made = await bob.call_tool("routine_create", {
                "name": "on-echo", "trigger_type": "event", "event_channel": "tool", "event_pattern": "echo",
                "prompt": "note the echo", "action_type": "tool", "tool": "write",
                "params": {"path": "fired.txt", "content": "fired\n"}})
            check(not made.is_error, "bob makes an event routine", text(made))
            await bob.call_tool("echo", {"message": "ping"})
            fired = None
            for _ in range(50):
                fired = await bob.call_tool("read", {"path": "fired.txt"})
                if not fired.is_error:
                    break
                await anyio.sleep(0.2)
            check(fired is not None and "fired" in text(fired), "bob's routine fired in his workspace", text(fired))
            theirs = await ann.call_tool("read", {"path": "fired.txt"})
            check(theirs.is_error, "and not in ann's", text(theirs))

            said = await bob.call_tool("write", {"path": "notes/secret.txt", "content": "bob's own\n"})
            check(not said.is_error, "bob has a notes/secret.txt of his own", text(said))
            still = await ann.call_tool("read", {"path": "notes/secret.txt"})
            check(SECRET in text(still), "and ann's is untouched", text(still))
    print("all checks passed", flush=True)


anyio.run(main)
