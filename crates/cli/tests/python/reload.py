"""Hot reload of a running `toolgate serve`, driven by the official MCP Python SDK
(crates/cli/tests/it/extensions.rs runs it).

Usage: reload.py TOOLGATE WORKSPACE

Saves toolgate.toml the way editors do (a new file renamed over the old one), breaks it, adds
and removes tools through the file and through `toolgate tools add|remove`, and checks each time
that the client gets `notifications/tools/list_changed` and that the new list is callable (or
that a bad change left the last good one in force). Prints `reload-ms: N` per reload (from the
save to the new tool's first successful call) and exits non-zero on the first failed check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

GREET = """
[[tools.custom]]
name = "greet"
description = "Greet someone."
parameters = { type = "object", properties = { who = { type = "string" } }, required = ["who"] }
command = "echo hello {{.who}}"
"""

SHOUT = """
[[tools.custom]]
name = "shout"
description = "Say a word loudly."
parameters = { type = "object", properties = { word = { type = "string" } }, required = ["word"] }
command = "echo {{.word}} | tr a-z A-Z"
"""

# A custom tool may not take a built-in's name: the whole change is refused.
SHADOW = """
[[tools.custom]]
name = "exec"
description = "Not the real exec."
parameters = { type = "object", properties = {} }
command = "echo fake"
"""

SKILL = """---
name: word-count
description: Count the words of a text. Use when asked how long a text is.
tools:
  - name: count_words
    description: Count the words of a text.
    parameters: { type: object, properties: { text: { type: string } }, required: [text] }
    command: echo {{.text}} | wc -w
---
# Word count
Call count_words with the text.
"""

STORED = {
    "name": "stored_tool",
    "description": "Added with toolgate tools add.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "command": "echo stored {{.n}}",
}


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}", flush=True)


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def save(workspace: str, text: str) -> None:
    """Writes toolgate.toml as editors do: a new file, renamed over the old one."""
    tmp = os.path.join(workspace, ".toolgate.toml.swp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(workspace, "toolgate.toml"))


class Changes:
    def __init__(self) -> None:
        self.seen = 0

    async def handler(self, message) -> None:
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method == "notifications/tools/list_changed":
            self.seen += 1

    async def wait(self, before: int, what: str) -> None:
        with anyio.move_on_after(10):
            while self.seen == before:
                await anyio.sleep(0.005)
        check(self.seen > before, f"list_changed after {what}")


async def names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def call_until(client: Client, tool: str, params: dict, expect: str, started: float) -> None:
    """Calls `tool` until it answers with `expect` (at most 10 s); reports the time from `started`."""
    deadline = time.monotonic() + 10
    while True:
        result = await client.call_tool(tool, params)
        if not result.is_error and expect in text_of(result):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: {tool} never answered {expect!r}: {text_of(result)!r}")
        await anyio.sleep(0.005)
    print(f"reload-ms: {(time.monotonic() - started) * 1000:.1f}", flush=True)


async def exercise(client: Client, changes: Changes, toolgate: str, workspace: str) -> None:
    check({"greet", "exec"} <= await names(client) and "shout" not in await names(client), "the first list")

    before, started = changes.seen, time.monotonic()
    save(workspace, GREET + SHOUT)
    await changes.wait(before, "adding a tool in toolgate.toml")
    check("shout" in await names(client), "the new tool is listed")
    await call_until(client, "shout", {"word": "hey"}, "HEY", started)

    before = changes.seen
    save(workspace, GREET + SHOUT + "\n[[tools.custom]\nname = ")
    await anyio.sleep(1.0)
    check(changes.seen == before, "a half-written save changes nothing")
    result = await client.call_tool("shout", {"word": "still"})
    check(not result.is_error and "STILL" in text_of(result), "the last good configuration stays in force")

    # An in-place save (no rename) that stalls after truncating the file: the empty file is never
    # put in force (it parses, as no custom tools); the finished save is read when it is closed.
    before = changes.seen
    with open(os.path.join(workspace, "toolgate.toml"), "w") as f:
        await anyio.sleep(0.5)
        check(changes.seen == before and "shout" in await names(client), "a save in progress changes nothing")
        f.write(GREET + SHOUT)
    await anyio.sleep(0.3)
    result = await client.call_tool("shout", {"word": "again"})
    check(not result.is_error and "AGAIN" in text_of(result), "the finished in-place save is in force")

    save(workspace, GREET + SHOUT + SHADOW)
    await anyio.sleep(1.0)
    result = await client.call_tool("exec", {"command": "echo the real exec"})
    check(not result.is_error and "the real exec" in text_of(result), "a tool shadowing a built-in is refused")

    before, started = changes.seen, time.monotonic()
    save(workspace, GREET.replace("echo hello", "echo bonjour"))
    await changes.wait(before, "removing a tool and changing another")
    check("shout" not in await names(client), "the removed tool is gone from the list")
    try:
        await client.call_tool("shout", {"word": "gone"})
        check(False, "calling a removed tool fails")
    except MCPError as e:
        check("unknown tool" in str(e), f"calling a removed tool is an unknown tool: {e}")
    await call_until(client, "greet", {"who": "ana"}, "bonjour ana", started)

    definition = os.path.join(workspace, "stored.json")
    with open(definition, "w") as f:
        json.dump(STORED, f)
    before, started = changes.seen, time.monotonic()
    add = subprocess.run([toolgate, "--workspace", workspace, "tools", "add", "--file", definition],
                         capture_output=True, text=True)
    check(add.returncode == 0, f"toolgate tools add: {add.stdout}{add.stderr}")
    await changes.wait(before, "toolgate tools add")
    await call_until(client, "stored_tool", {"n": 7}, "stored 7", started)

    # A skills folder that did not exist when the server started, then a skill declaring a tool.
    skill = os.path.join(workspace, "skills", "word-count")
    os.makedirs(skill)
    before, started = changes.seen, time.monotonic()
    with open(os.path.join(skill, "SKILL.md"), "w") as f:
        f.write(SKILL)
    await changes.wait(before, "a new skill with a tool")
    await call_until(client, "count_words", {"text": "one two three"}, "3", started)

    before = changes.seen
    rm = subprocess.run([toolgate, "--workspace", workspace, "tools", "remove", "stored_tool"],
                        capture_output=True, text=True)
    check(rm.returncode == 0, f"toolgate tools remove: {rm.stdout}{rm.stderr}")
    await changes.wait(before, "toolgate tools remove")
    check("stored_tool" not in await names(client), "the stored tool is gone")


async def main() -> None:
    toolgate, workspace = sys.argv[1], sys.argv[2]
    save(workspace, GREET)
    changes = Changes()
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "--approval", "never", "serve"])
    with anyio.fail_after(120):
        async with Client(params, mode="legacy", message_handler=changes.handler, cache=None) as client:
            await exercise(client, changes, toolgate, workspace)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
