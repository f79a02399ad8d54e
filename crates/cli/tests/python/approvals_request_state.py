"""One `write` of `AGENTS.md` (an instruction file: writing it needs approval) on a team gateway,
made by the official MCP Python SDK in one of two protocol eras.

Usage: approvals_request_state.py MODE URL KEY CONTENT [STATE]

- MODE `2026-07-28`: the stateless revision (no `initialize`, no session id). The client declares
  elicitation (form and URL) and drives the input-required round itself
  (`allow_input_required=True`), so the test sees what the server answered: an
  `InputRequiredResult` with a URL-mode elicitation and a `requestState`, or the call's result.
  With STATE the call is a retry: it echoes STATE byte for byte, with the answer a client gives
  a URL elicitation (the user opened the link: `accept`).
- MODE `legacy`: the `initialize` handshake, no elicitation: the call waits in the inbox.

Prints one JSON report on its last line: `{"kind": "input_required", "url", "message", "state"}`
or `{"kind": "result", "is_error", "text"}`, with the JSON-RPC methods it sent and whether the
server ever named a session.
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult, InputRequiredResult


async def main() -> None:
    mode, url, key, content = sys.argv[1:5]
    state = sys.argv[5] if len(sys.argv) > 5 else None
    sent: list[str] = []
    sessions: list[str] = []

    async def on_request(request) -> None:
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            return
        for message in body if isinstance(body, list) else [body]:
            if isinstance(message, dict) and "method" in message:
                sent.append(message["method"])

    async def on_response(response) -> None:
        if "mcp-session-id" in response.headers:
            sessions.append(response.headers["mcp-session-id"])

    async def on_elicit(context, params):
        # Never reached: the test drives the round itself. Declaring it declares elicitation.
        raise SystemExit("FAILED: the SDK answered an elicitation on its own")

    hooks = {"request": [on_request], "response": [on_response]}
    report: dict = {}
    with anyio.fail_after(90):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60, event_hooks=hooks) as http:
            transport = streamable_http_client(url, http_client=http)
            args = {"path": "AGENTS.md", "content": content}
            if mode == "legacy":
                async with Client(transport, mode="legacy") as client:
                    result = await client.call_tool("write", args)
            else:
                async with Client(transport, mode=mode, elicitation_callback=on_elicit) as client:
                    responses = {"toolgate_inbox": ElicitResult(action="accept")} if state else None
                    result = await client.session.call_tool(
                        "write", args, input_responses=responses, request_state=state, allow_input_required=True
                    )
            if isinstance(result, InputRequiredResult):
                requests = result.input_requests or {}
                inbox = requests.get("toolgate_inbox")
                params = inbox.params if inbox is not None else None
                report = {
                    "kind": "input_required",
                    "keys": sorted(requests),
                    "mode": getattr(params, "mode", None),
                    "url": getattr(params, "url", None),
                    "message": getattr(params, "message", None),
                    "state": result.request_state,
                }
            else:
                text = "\n".join(getattr(c, "text", "") for c in result.content)
                report = {"kind": "result", "is_error": bool(result.is_error), "text": text}
    report["methods"] = sent
    report["sessions"] = sessions
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
