"""Drives `toolgate serve` over stdio with the official MCP Python SDK: `capture_screenshot` of a
page on loopback and of a blocked address, and `canvas` `present` + `snapshot`; prints what it
saw as one JSON line (checked by crates/cli/tests/it/capture.rs).

Usage: capture_mcp.py TOOLGATE WORKSPACE URL BLOCKED_URL
"""

from __future__ import annotations

import base64
import json
import struct
import sys

import anyio
from mcp import Client, StdioServerParameters


def png_size(data: bytes) -> list[int] | None:
    """Width and height from a PNG's IHDR chunk; None when `data` is not a PNG."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR":
        return None
    return list(struct.unpack(">II", data[16:24]))


def outcome(result) -> dict:
    texts, images = [], []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            raw = base64.b64decode(block.data)
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None)
            images.append({"mime": mime, "size": png_size(raw), "bytes": len(raw)})
    return {"is_error": bool(result.is_error), "text": "\n".join(texts), "images": images}


async def main() -> None:
    toolgate, workspace, url, blocked = sys.argv[1:5]
    params = StdioServerParameters(command=toolgate, args=["--workspace", workspace, "serve"])
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            shot = await client.call_tool("capture_screenshot", {"url": url, "width": 400, "height": 300})
            refused = await client.call_tool("capture_screenshot", {"url": blocked})
            not_http = await client.call_tool("capture_screenshot", {"url": "file:///etc/passwd"})
            present = await client.call_tool(
                "canvas", {"action": "present", "content": "# Over stdio\n\nA *Markdown* canvas."}
            )
            snapshot = await client.call_tool("canvas", {"action": "snapshot", "width": 320, "height": 200})
    report = {
        "tools": sorted(n for n in names if n in ("capture_screenshot", "canvas", "browser")),
        "shot": outcome(shot),
        "refused": outcome(refused),
        "not_http": outcome(not_http),
        "present": outcome(present),
        "snapshot": outcome(snapshot),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
