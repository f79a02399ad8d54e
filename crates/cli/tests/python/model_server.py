"""A scripted model on loopback for the client tests (crates/cli/tests/it/clients.rs).

It stands in for a commercial model API: it speaks the Anthropic Messages API (streaming
server-sent events, as Claude Code uses it) and the OpenAI Responses API (server-sent events, as
Codex uses it), following their documented wire formats, and it serves the web page the
`web_fetch` step reads. Python standard library only.

Usage: model_server.py SCRIPT_JSON RECORDS_FILE PAGE_HTML. It binds 127.0.0.1 on a free port and
prints the port on its first line of stdout. SCRIPT_JSON is the list of tool calls to make, each
{"tool": "read", "args": {...}}; "{PAGE_URL}" in an argument becomes this server's page URL.

Stateless: for each request it counts the tool results already in the conversation and answers
with the next scripted call (to the offered tool whose name is the script's or ends with
`__NAME`), or with a final text once the script is done. A request without tools (title
generation, warm-ups, ...) gets plain text. Every tool result a request carries is appended
once (by call id) to RECORDS_FILE as a JSON line: {"api", "tool", "call_id", "content"}, where
"content" is exactly what the client put in the conversation for the model.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.loads(sys.argv[1])
RECORDS = sys.argv[2]
PAGE = sys.argv[3]
FINAL = "All five tools answered."
MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5-codex", "scripted"]

seen = set()
lock = threading.Lock()


def record(api, tool, call_id, content, is_error=False):
    with lock:
        if call_id in seen:
            return
        seen.add(call_id)
        with open(RECORDS, "a", encoding="utf-8") as f:
            line = {"api": api, "tool": tool, "call_id": call_id, "content": content, "is_error": is_error}
            f.write(json.dumps(line) + "\n")


def pick_tool(offered, name):
    """The offered tool for the script's `name`: clients prefix MCP tools (`mcp__toolgate__read`)
    or put them in a namespace (`mcp__toolgate/read`, see `tool_names`)."""
    for t in offered:
        if t.split("/")[-1] == name or t.endswith("__" + name):
            return t
    return None


def next_step(offered, done, page_url):
    """(tool name, args) of the next call, or a text when the script is done or cannot go on."""
    if done >= len(SCRIPT):
        return None, FINAL
    step = SCRIPT[done]
    tool = pick_tool(offered, step["tool"])
    if tool is None:
        return None, f"The tool {step['tool']!r} is not offered (offered: {sorted(offered)})."
    args = json.loads(json.dumps(step["args"]).replace("{PAGE_URL}", page_url))
    return (tool, args), None


# --- Anthropic Messages API ---------------------------------------------------------------


def anthropic_turn(body, page_url):
    offered = [t.get("name") for t in body.get("tools") or [] if t.get("name")]
    names, done = {}, 0
    for msg in body.get("messages", []):
        if not isinstance(msg.get("content"), list):
            continue
        for block in msg["content"]:
            if block.get("type") == "tool_use":
                names[block.get("id")] = block.get("name")
            elif block.get("type") == "tool_result":
                done += 1
                call_id = block.get("tool_use_id")
                record("anthropic", names.get(call_id), call_id, block.get("content"), bool(block.get("is_error")))
    if not offered:
        return None, "OK."
    call, text = next_step(offered, done, page_url)
    if call:
        return {"type": "tool_use", "id": f"toolu_step{done}", "name": call[0], "input": call[1]}, None
    return None, text


def anthropic_sse(model, block, text):
    msg_id = f"msg_{time.monotonic_ns()}"
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    start = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage}
    events = [("message_start", {"type": "message_start", "message": start})]
    if block:
        head = dict(block, input={})
        events.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": head}))
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        head = {"type": "text", "text": ""}
        events.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": head}))
        delta = {"type": "text_delta", "text": text}
    events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = "tool_use" if block else "end_turn"
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_json(model, block, text):
    content = [block] if block else [{"type": "text", "text": text}]
    return {"id": f"msg_{time.monotonic_ns()}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if block else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


# --- OpenAI Responses API -----------------------------------------------------------------


def tool_names(tools):
    """Function names of a Responses `tools` list; a function inside a namespace (Codex puts each
    MCP server's tools in one) is `NAMESPACE/NAME`."""
    out = []
    for t in tools or []:
        if t.get("type") == "function" and t.get("name"):
            out.append(t["name"])
        elif t.get("type") == "namespace":
            out.extend(f"{t.get('name')}/{n}" for n in tool_names(t.get("tools")))
    return out


def responses_turn(body, page_url):
    offered = tool_names(body.get("tools"))
    names, done = {}, 0
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        kind = item.get("type")
        if kind == "function_call":
            namespace = item.get("namespace")
            names[item.get("call_id")] = f"{namespace}/{item.get('name')}" if namespace else item.get("name")
        elif kind == "function_call_output":
            done += 1
            call_id = item.get("call_id")
            record("openai-responses", names.get(call_id), call_id, item.get("output"))
    if not offered:
        return None, "OK."
    call, text = next_step(offered, done, page_url)
    if call:
        return call + (f"call_step{done}",), None
    return None, text


def responses_sse(model, call, text):
    resp_id = f"resp_{time.monotonic_ns()}"
    seq = iter(range(1_000_000))
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
            "output": [], "status": "in_progress"}
    events = [("response.created", {"type": "response.created", "sequence_number": next(seq), "response": base})]
    if call:
        namespace, _, name = call[0].rpartition("/")
        item = {"type": "function_call", "id": f"fc_{call[2]}", "call_id": call[2], "name": name,
                "arguments": json.dumps(call[1]), "status": "completed"}
        if namespace:
            item["namespace"] = namespace
        added = dict(item, arguments="", status="in_progress")
        events.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                      "output_index": 0, "item": added}))
        events.append(("response.function_call_arguments.delta",
                       {"type": "response.function_call_arguments.delta", "sequence_number": next(seq),
                        "item_id": item["id"], "output_index": 0, "delta": item["arguments"]}))
        events.append(("response.function_call_arguments.done",
                       {"type": "response.function_call_arguments.done", "sequence_number": next(seq),
                        "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]}))
    else:
        item = {"type": "message", "id": f"msg_{resp_id}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        added = dict(item, content=[], status="in_progress")
        events.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                      "output_index": 0, "item": added}))
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": next(seq),
                                                      "item_id": item["id"], "output_index": 0, "content_index": 0,
                                                      "delta": text}))
    events.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                 "output_index": 0, "item": item}))
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    done = dict(base, status="completed", output=[item], usage=usage)
    events.append(("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": done}))
    return events


# --- HTTP ---------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("model_server: " + (fmt % args) + "\n")

    def log_request(self, code="-", size="-"):
        if self.command != "POST" or str(code) != "200":  # the answers to POSTs are logged in full
            super().log_request(code, size)

    def page_url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/page.html"

    def send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events):
        data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
        self.send(200, data, "text/event-stream")

    def log_answer(self, body, tool, text):
        offered = len(body.get("tools") or [])
        answer = f"call {tool}" if tool else f"text {text[:300]!r}"
        sys.stderr.write(f"model_server: {self.path} ({body.get('model')}, {offered} tools offered): {answer}\n")

    def do_HEAD(self):
        self.send(200, b"")

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/page.html":
            self.send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif path.endswith("/models"):
            self.send(200, {"object": "list", "has_more": False,
                            "data": [{"id": m, "type": "model", "object": "model", "display_name": m,
                                      "created_at": "2026-01-01T00:00:00Z", "created": 0, "owned_by": "scripted"}
                                     for m in MODELS]})
        else:
            self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})

    def do_POST(self):
        path = self.path.split("?")[0]
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        model = body.get("model", "scripted")
        if path.endswith("/messages/count_tokens"):
            self.send(200, {"input_tokens": 10})
        elif path.endswith("/messages"):
            block, text = anthropic_turn(body, self.page_url())
            self.log_answer(body, block["name"] if block else None, text)
            if body.get("stream"):
                self.send_events(anthropic_sse(model, block, text))
            else:
                self.send(200, anthropic_json(model, block, text))
        elif path.endswith("/responses"):
            call, text = responses_turn(body, self.page_url())
            self.log_answer(body, call[0] if call else None, text)
            self.send_events(responses_sse(model, call, text))
        else:
            self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
