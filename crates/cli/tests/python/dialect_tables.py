"""The seed tables: each seed system's tools, called over MCP in its dialect with the parameters
its seed documents, and the results checked (crates/cli/tests/it/dialects.rs runs it, once per
dialect).

Usage: dialect_tables.py TOOLGATE DIALECT WORKSPACE DENIED_WORKSPACE PORT

`toolgate serve --dialect DIALECT` is started by the official MCP Python SDK's stdio client in
WORKSPACE (files and a toolgate.toml with agents and a team, written by the Rust test). The script
serves the loopback site the web tools reach on PORT (the toolgate.toml allows it).

Checked, per dialect:
- `tools/list` holds exactly the `[[tools]]` of the dialect file (read with tomllib) and those are
  the seed's inventory as written down below (`INVENTORY`), so neither can change silently;
- every listed tool has a row in the dialect's table, and each row's check passes: a table row is
  (tool, params, check), in the seed's spelling, run in order in one session (a later row may use
  what an earlier one kept: `"$pid"`);
- the audit log (`toolgate audit --json`) has both names for every call in a renamed tool;
- in DENIED_WORKSPACE (`[tools] deny = ["read"]`) the dialect's name for `read` is neither listed
  nor callable.

DIALECT_TABLES_VERBOSE=1 prints what every call returned.

A row marked `gap=` is a known gap (the comment beside it says what is wrong): it must still fail,
so the mark goes once the gap is fixed. Prints `ok:` / `gap:` / `FAILED:` per check and a JSON
report as the last line; exits 1 on any failure.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

VERBOSE = bool(os.environ.get("DIALECT_TABLES_VERBOSE"))  # print what every call returned
DIALECT_FILES = Path(__file__).resolve().parents[3] / "dialect" / "dialects"

# The seeds' inventories: the tools each seed names that toolgate implements (the dialect file's
# `[[tools]]`), and those it does not implement yet (its `[[missing]]`). Written from the seeds
# (and, for 000 and 003, which name tools the dialect files take from the systems' docs, from the
# files' sources).
INVENTORY: dict[str, tuple[list[str], list[str]]] = {
    # Seed 000, §2 "Complete Tool Inventory" (+ agents_list and whatsapp_login from §6).
    "goclaw": (
        ["read_file", "write_file", "edit_file", "list_files", "search", "glob", "exec", "process",
         "web_search", "web_fetch", "memory_search", "memory_get", "sessions_list", "sessions_history",
         "sessions_send", "sessions_spawn", "subagents", "session_status", "agents_list", "delegate",
         "delegate_search", "evaluate_loop", "handoff", "team_tasks", "team_message", "skill_search",
         "spawn", "browser", "canvas", "image", "tts"],
        ["cron", "gateway", "message", "nodes", "whatsapp_login"],
    ),
    # Seed 001, "Built-in tools" and "Code execution".
    "linggen": (
        ["Glob", "Read", "Grep", "Write", "Edit", "Bash", "lock_paths", "unlock_paths",
         "delegate_to_agent", "WebSearch", "execute_code", "capture_screenshot"],
        [],
    ),
    # Seed 002, §2 "Complete Tool Inventory" (20 tools).
    "gomini": (
        ["read", "write", "edit", "apply_patch", "grep", "glob", "ls", "exec", "process", "agents_list",
         "sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "subagents",
         "sessions_status", "memory_search", "memory_get", "cron"],
        ["message"],
    ),
    # Seed 003, "Built-in Tool Categories", with OpenClaw's documented groups.
    "openclaw": (
        ["read", "write", "edit", "apply_patch", "exec", "process", "web_search", "web_fetch",
         "memory_search", "memory_get", "sessions_list", "sessions_history", "sessions_send",
         "sessions_spawn", "session_status", "agents_list", "subagents", "browser", "image", "tts"],
        ["message", "cron", "gateway", "nodes", "canvas"],
    ),
    # Seed 004, §4 "Summary Table".
    "ironclaw": (
        ["echo", "time", "json", "http", "read_file", "write_file", "list_dir", "apply_patch", "shell",
         "memory_search", "memory_write", "memory_read", "memory_tree", "tool_search", "tool_install",
         "tool_auth", "tool_activate", "tool_list", "tool_remove", "skill_list", "skill_search",
         "skill_install", "skill_remove", "html_to_markdown", "create_job", "list_jobs", "job_status",
         "cancel_job", "job_events", "job_prompt", "routine_create", "routine_list", "routine_update",
         "routine_delete", "routine_history"],
        ["build_software"],
    ),
}


# ---------------------------------------------------------------------------------------------
# Checks: each takes what a call gave and the run's state, and raises Fail when it is wrong.


class Fail(Exception):
    pass


@dataclass
class Outcome:
    error: bool  # a tool error or a protocol error (unknown tool)
    text: str


@dataclass
class State:
    workspace: Path
    kept: dict[str, Any]


Check = Callable[[Outcome, State], None]


def says(*needles: str, lacks: tuple[str, ...] = ()) -> Check:
    """The call succeeds; its text has every needle and none of `lacks`."""

    def check(o: Outcome, s: State) -> None:
        if o.error:
            raise Fail("the call failed")
        missing = [n for n in fill(needles, s.kept) if n not in o.text]
        present = [n for n in fill(lacks, s.kept) if n in o.text]
        if missing or present:
            raise Fail(f"lacks {missing}" if missing else f"has {present}")

    return check


def lines(*expected: tuple[int, str]) -> Check:
    """The call succeeds and returns exactly these numbered lines (cat -n form)."""

    def check(o: Outcome, _: State) -> None:
        if o.error:
            raise Fail("the call failed")
        got = [(int(n), t) for n, t in re.findall(r"^\s*(\d+)\t(.*)$", o.text, re.M)]
        if got != list(expected):
            raise Fail(f"numbered lines {got}, expected {list(expected)}")

    return check


def file(path: str, content: str | None) -> Check:
    """The call succeeds and leaves `path` with `content` (None: no such file)."""

    def check(o: Outcome, s: State) -> None:
        if o.error:
            raise Fail("the call failed")
        target = s.workspace / path
        actual = target.read_text() if target.exists() else None
        if actual != content:
            raise Fail(f"{path} holds {actual!r}, expected {content!r}")

    return check


def refused(*needles: str, lacks: tuple[str, ...] = ()) -> Check:
    """The call is refused (tool or protocol error) with every needle in the message, none of `lacks`."""

    def check(o: Outcome, s: State) -> None:
        if not o.error:
            raise Fail("the call succeeded")
        missing = [n for n in fill(needles, s.kept) if n not in o.text]
        present = [n for n in fill(lacks, s.kept) if n in o.text]
        if missing or present:
            raise Fail(f"the refusal lacks {missing}" if missing else f"the refusal has {present}")

    return check


def keep(name: str, pattern: str, then: Check, convert: Callable[[str], Any] = str) -> Check:
    """`then`, and keeps the first group of `pattern` in the text as `$name` for later rows."""

    def check(o: Outcome, s: State) -> None:
        then(o, s)
        found = re.search(pattern, o.text)
        if not found:
            raise Fail(f"no {pattern!r} to keep as ${name}")
        s.kept[name] = convert(found.group(1))

    return check


def either(first: Check, second: Check) -> Check:
    def check(o: Outcome, s: State) -> None:
        try:
            first(o, s)
        except Fail as e:
            try:
                second(o, s)
            except Fail as f:
                raise Fail(f"{e}; and {f}") from None

    return check


def both(*checks: Check) -> Check:
    def check(o: Outcome, s: State) -> None:
        for c in checks:
            c(o, s)

    return check


def paths_only(*expected: str, count: int | None = None) -> Check:
    """A file listing (glob) that is exactly these paths (or `count` paths), notices aside."""

    def check(o: Outcome, _: State) -> None:
        if o.error:
            raise Fail("the call failed")
        body = re.sub(r"</?tool_output[^>]*>", "", o.text)
        got = sorted(line.strip() for line in body.splitlines() if line.strip() and not line.startswith("["))
        wrong = len(got) != count if count is not None else got != sorted(expected)
        if wrong:
            raise Fail(f"paths {got}, expected {f'{count} paths' if count is not None else sorted(expected)}")

    return check


@dataclass
class Row:
    tool: str
    params: dict
    check: Check
    gap: str | None = None  # a known gap: this row must fail until it is fixed (see its comment)
    retry: float = 0  # seconds to call again until the check passes (a process's exit is noticed later)


# What the Rust test writes (crates/cli/tests/it/dialects.rs, `workspace`) that the checks compare.
UTIL_GO = "package main\n\nfunc helper() int { return 42 }\n"
OWL_SKILL = "---\nname: owl-facts\ndescription: Facts about owls\n---\nOwls turn their heads.\n"  # served as an archive
PROC = r"(tg-proc-[0-9a-f-]+)"
SESSION = r'"id": "([0-9a-f]{32})"'
SUBAGENT = r'"id": "([^"]+)"'

# Seed 002's apply_patch format with all three kinds of section, on the workspace's files (the
# context line of the update is the blank line 2: a single space).
PATCH = "\n".join([
    "*** Begin Patch",
    "*** Add File: src/added.go",
    "+package main",
    "+",
    "+func added() {}",
    "*** Update File: src/util.go",
    "@@ package main @@",
    " ",
    "-func helper() int { return 42 }",
    "+func helper() int { return 43 }",
    "*** Delete File: old.txt",
    "*** End Patch",
])


def tables(site: str) -> dict[str, list[Row]]:
    return {
        # ---- Seed 000 (GoClaw). Spellings: the dialect file's sources (the seed names no params).
        "goclaw": [
            Row("read_file", {"path": "a.txt"}, lines((1, "one"), (2, "two"), (3, "three"), (4, "four"))),
            # "with optional line range": offset is 0-based in GoClaw.
            Row("read_file", {"path": "a.txt", "offset": 1, "limit": 2}, lines((2, "two"), (3, "three"))),
            Row("read_file", {"path": "a.txt", "offset": -1}, refused("`offset` counts from 0")),
            Row("write_file", {"path": "notes/new.txt", "content": "fresh\n"}, file("notes/new.txt", "fresh\n")),
            Row("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "TWO"},
                file("a.txt", "one\nTWO\nthree\nfour\n")),
            Row("read_file", {"path": "rep.txt"}, says("a-a-a")),
            Row("edit_file", {"path": "rep.txt", "old_string": "a", "new_string": "b", "replace_all": True},
                file("rep.txt", "b-b-b\n")),
            Row("list_files", {}, says("a.txt", "src/")),
            Row("list_files", {"path": "src"}, says("main.go", "util.go", lacks=("a.txt",))),
            Row("search", {"pattern": "func helper", "glob": "*.go"}, says("src/util.go", lacks=("main.go",))),
            Row("search", {"pattern": "HELPER", "path": "src", "case_insensitive": True, "output_mode": "content"},
                says("src/util.go:3:func helper() int { return 42 }")),
            Row("glob", {"pattern": "**/*.go"}, paths_only("src/main.go", "src/util.go")),
            Row("exec", {"command": "echo goclaw-$((6 * 7))"}, says("goclaw-42")),
            Row("exec", {"command": "pwd", "working_dir": "src"}, says("/src\n")),
            Row("process", {"action": "list"}, says("process")),
            Row("web_search", {"query": "herons", "count": 1},
                says("Grey herons", "https://birds.example/herons", lacks=("Night herons",))),
            Row("web_fetch", {"url": f"{site}/page", "maxChars": 100},
                says("A distinctive sentence about herons.", lacks=("The closing sentence",))),
            Row("memory_search", {"query": "staging server", "maxResults": 3, "minScore": 0},
                says("memory/project.md", "marmot")),
            Row("memory_get", {"path": "memory/project.md", "from": 3, "lines": 1},
                both(says("marmot", lacks=("# Project",)), lines((3, "The staging server is called marmot.")))),
            Row("agents_list", {}, says('"reviewer"', "Reviews Go code")),
            # An async sub-agent (seed §2): the call returns its id at once.
            Row("sessions_spawn", {"task": "look around", "label": "scout"}, keep("sub", SUBAGENT, says('"status"'))),
            Row("spawn", {"task": "look again", "label": "scout-2"}, keep("sub2", SUBAGENT, says('"status"'))),
            Row("subagents", {"action": "list"}, says("$sub", "$sub2", '"scout"', '"scout-2"')),
            # Cancelled, or (the model endpoint being closed) already failed: either way found by its id.
            Row("subagents", {"action": "cancel", "subagent_id": "$sub2"},
                either(says("$sub2"), refused("$sub2", "already finished"))),
            # GoClaw's default action is run: it waits for the result (the model endpoint is closed).
            Row("subagents", {"task": "quick look"}, says("ended failed")),
            Row("sessions_list", {"limit": 5}, keep("session", SESSION, says('"sessions"'))),
            Row("sessions_history", {"session_key": "$session", "limit": 5},
                says('"session_id": "$session"', '"role": "user"')),
            Row("session_status", {"session_key": "$session"}, says("$session")),
            # Continuing a session runs its model; an unknown key shows `session_key` arrives as toolgate's.
            Row("sessions_send", {"session_key": "nope", "message": "hi"}, refused("no session `nope`")),
            Row("delegate", {"action": "delegate", "agent": "reviewer", "task": "check the parser", "mode": "async"},
                keep("delegation", SUBAGENT, says('"status"'))),
            Row("delegate", {"action": "list"}, says("$delegation", "reviewer")),
            Row("delegate", {"action": "cancel", "delegation_id": "$delegation"},
                either(says("$delegation"), refused("$delegation", "already finished"))),
            Row("delegate_search", {"query": "review Go code", "max_results": 2}, says("reviewer")),
            # The model endpoint is closed: the loop starts and says where it stopped.
            Row("evaluate_loop", {"generator": "reviewer", "evaluator": "reviewer", "task": "write a haiku",
                                  "pass_criteria": "five-seven-five", "max_rounds": 1}, refused("round 1")),
            # seed §10: a handoff redirects an agent conversation; an MCP caller is in none.
            Row("handoff", {"action": "transfer", "agent": "reviewer", "reason": "needs review"},
                refused("inside an agent session")),
            Row("team_tasks",
                {"action": "create", "subject": "write the parser", "description": "in Go", "priority": 2},
                keep("task", r'"id": (\d+)', says('"subject": "write the parser"', '"description": "in Go"',
                                                  '"priority": 2'), int)),
            Row("team_tasks", {"action": "claim", "task_id": "$task"}, says('"status": "claimed"', '"owner": "coder"')),
            Row("team_tasks", {"action": "complete", "task_id": "$task", "result": "parsed"},
                says('"status": "done"', '"result": "parsed"')),
            Row("team_tasks", {"action": "search", "query": "parser"}, says("write the parser")),
            # seed §8: `list` shows the active tasks unless a filter says otherwise.
            Row("team_tasks", {"action": "list"}, says('"tasks"', lacks=("write the parser",))),
            Row("team_tasks", {"action": "list", "status": "all", "order": "newest"}, says("write the parser")),
            Row("team_tasks", {"action": "list", "status": ""}, says('"tasks"', lacks=("write the parser",))),
            Row("team_message", {"action": "send", "to": "reviewer", "text": "please look"}, says('"sent"')),
            Row("team_message", {"action": "broadcast", "text": "parser done"}, says('"sent"')),
            # `read` returns the caller's unread messages: none of its own.
            Row("team_message", {"action": "read"}, says('"messages"', lacks=("please look", "parser done"))),
            Row("skill_search", {"query": "herons", "max_results": 3}, says("heron-facts")),
            # Other dialects' spellings are refused naming GoClaw's.
            Row("Read", {"path": "a.txt"}, refused("unknown tool `Read`", "`read_file`")),
            # Linggen's `line_range` fills two of GoClaw's parameters: both are named.
            Row("read_file", {"path": "a.txt", "line_range": [1, 2]}, refused("`line_range`", "use `limit` and `offset`")),
            Row("list_dir", {"path": "src"}, refused("`list_files`")),
            # Browser and media (issue 30): the page through the vetting proxy (the site is allowed),
            # a canvas written to a file under stdio, speech offline with espeak-ng, no image endpoint.
            Row("browser", {"action": "navigate", "targetUrl": f"{site}/page"}, says("/page")),
            Row("browser", {"action": "snapshot", "maxChars": 4000, "depth": 20}, says("herons")),
            Row("browser", {"action": "stop"}, says("stopped")),
            Row("canvas", {"action": "present", "content": "<h1>Herons</h1><script>alert(1)</script>",
                           "format": "html"}, says("canvas", lacks=("alert(1)",))),
            Row("image", {"prompt": "a heron at dawn"}, refused("[media")),
            Row("tts", {"text": "Herons stand still.", "provider": "espeak-ng"}, says("espeak-ng")),
        ],
        # ---- Seed 001 (Linggen): "Built-in tools" table, aliases, "Code execution".
        "linggen": [
            Row("Glob", {"globs": ["**/*.go"]}, paths_only("src/main.go", "src/util.go")),
            Row("Glob", {"globs": ["src/*.go", "*.txt"]},
                paths_only("a.txt", "dup.txt", "old.txt", "rep.txt", "src/main.go", "src/util.go")),
            Row("Glob", {"globs": ["**/*.go"], "max_results": 1}, paths_only(count=1)),
            Row("Read", {"path": "a.txt", "line_range": [2, 3]}, lines((2, "two"), (3, "three"))),
            Row("Read", {"path": "a.txt", "line_range": "2-3"}, lines((2, "two"), (3, "three"))),
            # The continuation notice of a range read is in Linggen's words: `Read` and a
            # `line_range` as long as the one asked for.
            Row("Read", {"path": "a.txt", "line_range": [1, 2]},
                says("call `Read` with line_range=[3, 4]", lacks=("`read`", "offset="))),
            Row("Read", {"file": "a.txt"}, lines((1, "one"), (2, "two"), (3, "three"), (4, "four"))),
            Row("Read", {"filepath": "a.txt", "max_bytes": 8}, says("one", lacks=("three",))),
            Row("Read", {"path": "a.txt", "line_range": [3, 2]}, refused("`Read`", "/line_range", "before the start")),
            Row("Read", {"path": "a.txt", "line_range": "0-2"}, refused("count from 1")),
            Row("Read", {"path": "a.txt", "file": "a.txt"}, refused("the same parameter", "give it once")),
            Row("Grep", {"query": "func helper", "globs": ["**/*.go"], "max_results": 5},
                says("src/util.go:3:func helper() int { return 42 }", lacks=("main.go",))),
            Row("Grep", {"query": "t[wh]", "max_results": 1}, says("a.txt:2:two", lacks=("three",))),
            # The cut notice is in Linggen's words where Linggen has them (`max_results`, `globs`);
            # it still names grep's `path` and `type`, which Linggen's Grep lacks.
            Row("Grep", {"query": "t[wh]", "max_results": 1},
                says("raise `max_results`", "`globs`", lacks=("`head_limit`", "`glob`"))),
            Row("Write", {"path": "notes/new.md", "content": "# New\n"}, file("notes/new.md", "# New\n")),
            Row("Write", {"filepath": "notes/other.md", "content": "other\n"}, file("notes/other.md", "other\n")),
            Row("Edit", {"path": "a.txt", "old_string": "two", "new_string": "TWO"},
                file("a.txt", "one\nTWO\nthree\nfour\n")),
            Row("Read", {"path": "rep.txt"}, says("a-a-a")),
            Row("Edit", {"file": "rep.txt", "search": "a", "replace": "b", "replace_all": True},
                file("rep.txt", "b-b-b\n")),
            Row("Edit", {"filepath": "rep.txt", "from": "b-b", "to": "c-c"}, file("rep.txt", "c-c-b\n")),
            Row("Edit", {"path": "rep.txt", "old": "c-c-b", "new": "done"}, file("rep.txt", "done\n")),
            Row("Edit", {"path": "rep.txt", "old_string": "done", "old": "done", "new_string": "x"},
                refused("the same parameter")),
            Row("Bash", {"cmd": "echo linggen-$((6 * 7)); echo to-stderr >&2"}, says("linggen-42", "to-stderr")),
            Row("Bash", {"cmd": "sleep 5; echo finished", "timeout_ms": 1000}, says("timed out", lacks=("finished",))),
            Row("Bash", {"cmd": "echo x", "timeout_ms": -5}, refused("timeout_ms")),
            Row("lock_paths", {"globs": ["src/**"], "ttl_ms": 60000},
                keep("token", r"(tg-lock-[0-9a-f-]+)", says("src/**"))),
            Row("unlock_paths", {"tokens": ["$token"]}, says("Released 1 lock")),
            # The model endpoint is closed: the delegated session starts and fails at once.
            Row("delegate_to_agent", {"target_agent_id": "reviewer", "task": "review the parser"},
                says("session", "ended failed")),
            Row("delegate_to_agent", {"target_agent_id": "nobody", "task": "review"}, refused("nobody")),
            Row("WebSearch", {"query": "herons", "max_results": 1},
                says("Grey herons", "They wade.", lacks=("Night herons",))),
            Row("execute_code", {"language": "python", "code": "print(6 * 7)"}, says("42")),
            Row("execute_code", {"language": "py", "code": "import sys; print('py', sys.version_info[0])"},
                says("py 3")),
            Row("execute_code", {"language": "sh", "code": "echo sh-$((2 + 3))"}, says("sh-5")),
            Row("read_file", {"path": "a.txt"}, refused("unknown tool `read_file`", "`Read`")),
            Row("read", {"path": "a.txt"}, refused("`Read`")),
            Row("Read", {"path": "a.txt", "offset": 2}, refused("`offset`", "write it as `line_range`")),
            Row("bash", {"cmd": "true"}, refused("`Bash`")),
            # seed 001: one screenshot of a page (the site is allowed), saved and shown.
            Row("capture_screenshot", {"url": f"{site}/page", "delay_ms": 10}, says("browser-output")),
        ],
        # ---- Seed 002 (gomini): its Go parameter structs.
        "gomini": [
            Row("read", {"path": "a.txt", "offset": 0, "limit": 2}, lines((1, "one"), (2, "two"))),
            # The continuation notice counts from 0 too: line 1 shown, read on at offset 1.
            Row("read", {"path": "a.txt", "offset": 0, "limit": 1}, says("`read` with offset=1")),
            Row("read", {"path": "a.txt", "offset": 2}, lines((3, "three"), (4, "four"))),
            Row("read", {"path": "a.txt", "offset": -1}, refused("`read`", "/offset", "counts from 0")),
            Row("write", {"path": "out/deep/new.go", "content": "package deep\n"},
                file("out/deep/new.go", "package deep\n")),
            Row("edit", {"path": "a.txt", "old_text": "two", "new_text": "TWO"},
                file("a.txt", "one\nTWO\nthree\nfour\n")),
            Row("read", {"path": "dup.txt"}, says("x")),
            # "old_text must appear exactly once in the file (error if not found or ambiguous)"
            Row("edit", {"path": "dup.txt", "old_text": "x", "new_text": "y"}, refused("dup.txt", "2 times")),
            # That refusal comes from the tool as it runs, and is said in gomini's words.
            Row("edit", {"path": "dup.txt", "old_text": "x", "new_text": "z"},
                refused("/old_text", lacks=("old_string",))),
            Row("edit", {"path": "dup.txt", "old_text": "absent", "new_text": "y"}, refused("dup.txt")),
            Row("read", {"path": "src/util.go"}, says("helper")),
            Row("apply_patch", {"patch": PATCH}, both(
                file("src/added.go", "package main\n\nfunc added() {}\n"),
                file("src/util.go", UTIL_GO.replace("42", "43")),
                file("old.txt", None))),
            Row("grep", {"pattern": "func (helper|main)", "path": "src", "include": "*.go"},
                says("src/util.go:3:func helper() int { return 43 }", "src/main.go:3:func main() {")),
            Row("grep", {"pattern": "func", "include": "main.go"}, says("src/main.go:3:", lacks=("util.go",))),
            Row("glob", {"pattern": "**/*.go"},
                paths_only("out/deep/new.go", "src/added.go", "src/main.go", "src/util.go")),
            Row("glob", {"pattern": "*.go", "path": "src"}, says("main.go", "util.go", lacks=("new.go",))),
            # "Returns entries with type (file/dir) and size."
            Row("ls", {"path": "src"}, says("file", f"{len(UTIL_GO)}  util.go")),
            Row("ls", {"path": "."}, says("dir", "src")),
            Row("exec", {"command": "echo $WHO in $(basename $PWD)", "env": {"WHO": "gomini"}, "workdir": "src",
                         "timeout": 10}, says("gomini in src")),
            # gomini's default timeout is 1800 s (seed §4); toolgate's exec refuses more than 600 s
            # (the dialect file's [[gaps]] for exec).
            Row("exec", {"command": "echo long", "timeout": 1800}, says("long"),
                gap="exec refuses gomini's documented timeout of 1800 s (at most 600)"),
            Row("exec", {"command": "sleep 60", "background": True}, keep("pid", PROC, says("background"))),
            Row("process", {"action": "status", "process_id": "$pid"}, says("running")),
            Row("process", {"action": "signal", "process_id": "$pid", "signal": "SIGTERM"}, says("TERM")),
            Row("process", {"action": "status", "process_id": "$pid"}, says("TERM", lacks=("running",)), retry=30),
            Row("exec", {"command": "read line; echo got:$line", "background": True},
                keep("reader", PROC, says("background"))),
            Row("process", {"action": "input", "process_id": "$reader", "input": "hello\n"},
                says("$reader", "wrote 6 bytes")),
            Row("process", {"action": "poll", "process_id": "$reader"}, says("got:hello"), retry=30),
            Row("process", {"action": "status", "process_id": "nope"}, refused("nope")),
            # "Returns information about the agent".
            Row("agents_list", {}, says('"you": "coder"')),
            Row("sessions_list", {"limit": 5}, says('"sessions"')),
            # The sub-agent's model endpoint is closed: it still leaves a session (the run fails).
            Row("sessions_spawn", {"prompt": "find the main function"}, says("session", "ended failed")),
            Row("sessions_list", {"limit": 5}, keep("session", SESSION, says("find the main function"))),
            Row("sessions_history", {"session_id": "$session", "limit": 5}, says("find the main function")),
            Row("sessions_send", {"session_id": "nope", "content": "hi"}, refused("no session `nope`")),
            Row("subagents", {}, says('"subagents"')),
            # "Return current session info": an MCP caller is in no agent session, so toolgate's
            # session_status has no current session to show (issue: `no session `default``).
            # The MCP session itself (a stdio server is its own session): its calls so far.
            Row("sessions_status", {}, says("mcp (stdio)")),
            Row("memory_search", {"query": "staging server", "max_results": 3, "min_score": 0},
                says("memory/project.md", "marmot")),
            Row("memory_get", {"path": "memory/project.md", "from": 3, "lines": 1},
                lines((3, "The staging server is called marmot."))),
            Row("read_file", {"path": "a.txt"}, refused("unknown tool `read_file`", "`read`")),
            Row("edit", {"path": "a.txt", "old_string": "one", "new_text": "ONE"},
                refused("`old_string`", "write it as `old_text`")),
            # Linggen's `line_range` is refused naming gomini's spelling, `offset` and `limit`.
            Row("read", {"path": "a.txt", "line_range": [1, 2]}, refused("`line_range`", "use `limit` and `offset`")),
            Row("session_status", {}, refused("`sessions_status`")),
            # seed 002 §5: a cron entry (no agent session behind an MCP caller: a routine runs it).
            Row("cron", {"action": "add", "schedule": "0 9 * * 1-5", "prompt": "standup notes"},
                keep("cron", r"entry (cron-[0-9a-f]+)", says("0 9 * * 1-5", "Next fire"))),
            Row("cron", {"action": "list"}, says("$cron", "0 9 * * 1-5", "standup notes")),
            Row("cron", {"action": "remove", "id": "$cron"}, says("$cron")),
            Row("cron", {"action": "list"}, says(lacks=("$cron",))),
            Row("cron", {"action": "add", "schedule": "0 9 * * 8", "prompt": "x"}, refused("day")),
        ],
        # ---- Seed 003 (OpenClaw): spellings from OpenClaw's docs and source (the dialect file's sources).
        "openclaw": [
            Row("read", {"path": "a.txt", "offset": 2, "limit": 2}, lines((2, "two"), (3, "three"))),
            Row("read", {"file_path": "a.txt"}, lines((1, "one"), (2, "two"), (3, "three"), (4, "four"))),
            Row("read", {"path": "a.txt", "file_path": "a.txt"}, refused("the same parameter")),
            # OpenAI's strict mode sends every parameter, the absent ones as null.
            Row("read", {"path": "a.txt", "file_path": None, "offset": None, "limit": None},
                lines((1, "one"), (2, "two"), (3, "three"), (4, "four"))),
            Row("read", {}, refused("path")),
            Row("write", {"path": "notes/new.txt", "content": "fresh\n"}, file("notes/new.txt", "fresh\n")),
            Row("write", {"file_path": "notes/cc.txt", "content": "claude\n"}, file("notes/cc.txt", "claude\n")),
            Row("edit", {"path": "a.txt", "oldText": "two", "newText": "TWO"},
                file("a.txt", "one\nTWO\nthree\nfour\n")),
            Row("edit", {"file_path": "a.txt", "old_string": "TWO", "new_string": "2"},
                file("a.txt", "one\n2\nthree\nfour\n")),
            Row("edit", {"path": "a.txt", "oldText": "2", "old_string": "2", "newText": "two"},
                refused("the same parameter")),
            Row("read", {"path": "src/util.go"}, says("helper")),
            Row("apply_patch", {"input": PATCH}, both(
                file("src/added.go", "package main\n\nfunc added() {}\n"),
                file("src/util.go", UTIL_GO.replace("42", "43")),
                file("old.txt", None))),
            Row("exec", {"command": "echo $WHO in $(basename $PWD)", "workdir": "src", "env": {"WHO": "openclaw"},
                         "timeout": 10}, says("openclaw in src")),
            Row("exec", {"command": "read line; echo got:$line; sleep 60", "background": True},
                keep("sid", PROC, says("background"))),
            Row("process", {"action": "list"}, says("$sid")),
            # exec's result says how to follow the process in OpenClaw's words (`sessionId`, `data`).
            Row("exec", {"command": "true", "background": True},
                says('"sessionId"', '"data"', lacks=('"id"', '"input"'))),
            Row("process", {"action": "write", "sessionId": "$sid", "data": "hello\n", "eof": True}, says("$sid")),
            Row("process", {"action": "poll", "sessionId": "$sid", "timeout": 2000}, says("got:hello")),
            Row("process", {"action": "log", "sessionId": "$sid", "offset": 0, "limit": 5}, says("got:hello")),
            Row("process", {"action": "kill", "sessionId": "$sid"}, says("$sid")),
            Row("process", {"action": "poll", "sessionId": "$sid", "timeout": 0}, says("killed", lacks=("running",))),
            Row("web_search", {"query": "herons", "count": 2}, says("Grey herons", "Night herons")),
            Row("web_search", {"query": "herons", "count": 1}, says("Grey herons", lacks=("Night herons",))),
            Row("web_fetch", {"url": f"{site}/page", "maxChars": 2000},
                says("A distinctive sentence about herons.", "The closing sentence about herons.")),
            Row("memory_search", {"query": "deploy key", "maxResults": 2, "minScore": 0}, says("MEMORY.md", "Tuesday")),
            Row("memory_search", {"query": "deploy key staging server", "maxResults": 1, "minScore": 0},
                says("1. ", lacks=("\n2. ",))),
            Row("memory_get", {"path": "MEMORY.md", "from": 3, "lines": 1},
                lines((3, "The deploy key rotates every Tuesday."))),
            Row("agents_list", {}, says('"reviewer"')),
            # Non-blocking (OpenClaw's docs): the call returns the run's id at once.
            Row("sessions_spawn", {"task": "look around", "label": "scout", "agentId": "reviewer"},
                keep("sub", SUBAGENT, says('"status"'))),
            Row("subagents", {}, says("$sub", '"scout"', '"agent": "reviewer"')),
            Row("subagents", {"action": "list"}, says("$sub")),
            Row("subagents", {"action": "kill", "target": "$sub"},
                either(says("$sub"), refused("$sub", "already finished"))),
            Row("sessions_list", {"limit": 5, "agentId": "reviewer"}, keep("session", SESSION, says('"reviewer"'))),
            Row("sessions_history", {"sessionKey": "$session", "limit": 5}, says("look around")),
            Row("session_status", {"sessionKey": "$session"}, says("$session")),
            Row("sessions_send", {"sessionKey": "nope", "message": "hi"}, refused("no session `nope`")),
            Row("read_file", {"path": "a.txt"}, refused("unknown tool `read_file`", "`read`")),
            Row("Bash", {"command": "true"}, refused("`exec`")),
            Row("process", {"action": "poll", "id": "$sid"}, refused("`id`", "write it as `sessionId`")),
            # Browser and media (issue 30): the page through the vetting proxy, speech offline, and
            # `image` (describe) with no vision endpoint configured.
            Row("browser", {"action": "navigate", "targetUrl": f"{site}/page"}, says("/page")),
            Row("browser", {"action": "snapshot", "maxChars": 4000}, says("herons")),
            Row("browser", {"action": "stop"}, says("stopped")),
            Row("image", {"image": "a.txt", "prompt": "what is this"}, refused()),
            Row("tts", {"text": "Herons stand still."}, says("espeak-ng")),
        ],
        # ---- Seed 004 (IronClaw): §4's schemas.
        "ironclaw": [
            Row("echo", {"message": "plumbing works"}, says("plumbing works")),
            Row("time", {"operation": "now"}, says("iso", "unix", "unix_millis")),
            Row("time", {"operation": "parse", "timestamp": "2026-11-27T14:00:00Z"}, says("1795788000")),
            Row("time", {"operation": "format", "timestamp": "2026-11-27T14:00:00Z", "format": "%Y/%m/%d"},
                says("2026/11/27")),
            Row("time",
                {"operation": "diff", "timestamp": "2026-11-27T14:00:00Z", "timestamp2": "2026-11-27T15:00:00Z"},
                says("3600")),
            Row("json", {"operation": "parse", "data": '{"a": [7, 8]}'}, says("7", "8")),
            Row("json", {"operation": "query", "data": {"a": [7, 8]}, "path": "$.a[1]"}, says("8", lacks=("7",))),
            Row("json", {"operation": "stringify", "data": {"k": "v"}}, says('{\\"k\\":\\"v\\"}')),
            Row("json", {"operation": "validate", "data": "{not json"}, says("false")),
            Row("http", {"method": "GET", "url": f"{site}/data", "headers": [{"name": "X-Probe", "value": "1"}],
                         "timeout_secs": 10}, says("HTTP 200", '"n": 3', '"probe": "1"')),
            Row("http", {"method": "POST", "url": f"{site}/echo", "body": {"ping": 1}}, says('"ping"')),
            Row("read_file", {"path": "a.txt", "offset": 2, "limit": 2}, lines((2, "two"), (3, "three"))),
            Row("read_file", {"path": "a.txt"}, lines((1, "one"), (2, "two"), (3, "three"), (4, "four"))),
            Row("write_file", {"path": "notes/new.txt", "content": "fresh\n"}, file("notes/new.txt", "fresh\n")),
            Row("list_dir", {}, says("a.txt", "src")),
            Row("list_dir", {"path": "src"}, says("main.go", "util.go")),
            Row("list_dir", {"recursive": True, "max_depth": 2}, says("main.go", "new.txt")),
            # IronClaw's apply_patch is an exact string replacement.
            Row("apply_patch", {"path": "a.txt", "old_string": "two", "new_string": "TWO"},
                file("a.txt", "one\nTWO\nthree\nfour\n")),
            Row("read_file", {"path": "rep.txt"}, says("a-a-a")),
            Row("apply_patch", {"path": "rep.txt", "old_string": "a", "new_string": "b", "replace_all": True},
                file("rep.txt", "b-b-b\n")),
            Row("apply_patch", {"patch": "*** Begin Patch\n*** End Patch"}, refused("`patch`")),
            Row("shell", {"command": "echo ironclaw-$((6 * 7)) in $(basename $PWD)", "workdir": "src", "timeout": 10},
                says("ironclaw-42 in src")),
            Row("memory_write",
                {"content": "The release train leaves on Friday.\n", "target": "memory", "append": True},
                says("MEMORY.md")),
            Row("memory_write", {"content": "Met the herons.\n", "target": "daily_log"}, says("memory/daily/")),
            Row("memory_write", {"content": "# Birds\n\nHerons wade.\n", "target": "memory/birds.md"},
                says("memory/birds.md")),
            Row("memory_read", {"path": "MEMORY.md"}, says("Tuesday", "release train leaves on Friday")),
            Row("memory_search", {"query": "release train", "limit": 2}, says("MEMORY.md", "Friday")),
            Row("memory_tree", {}, says("MEMORY.md", "birds.md", "project.md")),
            Row("memory_tree", {"path": "memory", "depth": 1}, says("birds.md", lacks=("MEMORY.md",))),
            Row("memory_write", {"content": "I am someone else", "target": "IDENTITY.md"}, refused("IDENTITY.md")),
            Row("tool_search", {"query": "github"}, says("github")),
            Row("tool_list", {}, says("builtin", "tool_list")),
            # The list names the built-ins by toolgate's names (`read`, `exec`), which an IronClaw
            # caller cannot call here (`read` is refused below): it should say `read_file`, `shell`.
            Row("tool_list", {}, says("read_file", "shell"),
                gap="tool_list names the built-ins by toolgate's names, not the dialect's"),
            Row("tool_list", {"kind": "mcp"}, says("no tools of that kind")),
            Row("tool_install", {"name": "nothing-like-this"}, refused("nothing-like-this")),
            Row("tool_auth", {"name": "nothing-like-this"}, refused("nothing-like-this")),
            Row("tool_activate", {"name": "nothing-like-this"}, refused("nothing-like-this")),
            Row("tool_remove", {"name": "nothing-like-this"}, refused("nothing-like-this")),
            Row("skill_list", {}, says("heron-facts", lacks=("folder:",))),
            Row("skill_list", {"verbose": True}, says("heron-facts", "folder: .agents/skills/heron-facts")),
            Row("skill_search", {"query": "herons"}, says("heron-facts")),
            Row("skill_install", {"url": f"{site}/skills/owl-facts.tar.gz"}, both(
                says("owl-facts"), file(".agents/skills/owl-facts/SKILL.md", OWL_SKILL))),
            Row("skill_list", {}, says("heron-facts", "owl-facts")),
            Row("skill_remove", {"name": "owl-facts"}, file(".agents/skills/owl-facts/SKILL.md", None)),
            Row("html_to_markdown",
                {"html": "<h1>Heading</h1><p>Some <b>bold</b> words.</p>", "url": "https://x.example/"},
                says("# Heading", "**bold**")),
            Row("read", {"path": "a.txt"}, refused("unknown tool `read`", "`read_file`")),
            Row("edit", {"path": "a.txt", "old_string": "one", "new_string": "1"}, refused("`apply_patch`")),
            Row("Bash", {"command": "true"}, refused("`shell`")),
            # seed 004 §4.8 jobs: a sandbox job (its agent's model endpoint is closed, so it fails;
            # found by its id all the same), and another's or an unknown id refused.
            Row("create_job", {"title": "scan", "description": "look around"},
                keep("job", r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", says())),
            Row("list_jobs", {"filter": "all"}, says("$job")),
            Row("job_status", {"job_id": "$job"}, says()),
            Row("job_events", {"job_id": "$job"}, says()),
            Row("job_prompt", {"job_id": "ffffffff", "content": "hi"}, refused("ffffffff")),
            Row("cancel_job", {"job_id": "ffffffff"}, refused("ffffffff")),
            # seed 004 §4.9 routines.
            Row("routine_create", {"name": "nightly", "trigger_type": "cron", "prompt": "summarize the day",
                                   "schedule": "0 9 * * 1-5", "cooldown_secs": 60}, says("nightly")),
            Row("routine_list", {}, says("nightly", "0 9 * * 1-5")),
            Row("routine_update", {"name": "nightly", "enabled": False}, says("nightly")),
            Row("routine_history", {"name": "nightly"}, says()),
            Row("routine_delete", {"name": "nightly"}, says("nightly")),
            Row("routine_create", {"name": "bad", "trigger_type": "cron", "prompt": "x", "schedule": "61 * * * *"},
                refused("minute")),
        ],
    }


# ---------------------------------------------------------------------------------------------
# The loopback site the web tools reach.


def owl_archive() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = OWL_SKILL.encode()
        info = tarfile.TarInfo("owl-facts/SKILL.md")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class Site(BaseHTTPRequestHandler):
    archive = owl_archive()

    def answer(self, kind: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/data"):
            probe = self.headers.get("X-Probe", "")
            self.answer("application/json", json.dumps({"ok": True, "n": 3, "probe": probe}).encode())
        elif self.path.startswith("/search"):
            # SearXNG's JSON format (docs/web.md).
            hits = [{"title": "Grey herons", "url": "https://birds.example/herons", "content": "They wade."},
                    {"title": "Night herons", "url": "https://birds.example/night", "content": "They hunt at night."}]
            self.answer("application/json", json.dumps({"results": hits}).encode())
        elif self.path.startswith("/skills/owl-facts.tar.gz"):
            self.answer("application/gzip", self.archive)
        else:
            page = ("<html><head><title>Herons</title></head><body><article><h1>Herons</h1>"
                    "<p>A distinctive sentence about herons.</p>"
                    f"<p>{'Herons wade in shallow water and wait for fish. ' * 8}</p>"
                    "<p>The closing sentence about herons.</p></article></body></html>")
            self.answer("text/html; charset=utf-8", page.encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer("application/json", body)

    def log_message(self, *_: Any) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# The run.


class Run:
    """What one dialect's run found: rows (calls) and the other checks counted apart."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.rows = 0
        self.rows_passed = 0
        self.checks_passed = 0
        self.failed: list[str] = []
        self.gaps: list[str] = []

    def ok(self, what: str, row: bool = False) -> None:
        if row:
            self.rows_passed += 1
        else:
            self.checks_passed += 1
        print(f"ok: {what}", flush=True)

    def fail(self, what: str) -> None:
        self.failed.append(what)
        print(f"FAILED: {what}", flush=True)

    def expect(self, cond: bool, what: str, detail: str = "") -> None:
        if cond:
            self.ok(what)
        else:
            self.fail(f"{what}: {detail}" if detail else what)


def fill(needles: tuple[str, ...], kept: dict[str, Any]) -> list[str]:
    """Needles with `$name` replaced by what an earlier row kept."""
    return [re.sub(r"\$(\w+)", lambda m: str(kept.get(m.group(1), m.group(0))), n) for n in needles]


def substitute(value: Any, kept: dict[str, Any]) -> Any:
    """`"$name"` (a whole string) is what an earlier row kept (a shell's `$WHO` stays as it is)."""
    if isinstance(value, str) and value.startswith("$") and value[1:] in kept:
        return kept[value[1:]]
    if isinstance(value, list):
        return [substitute(v, kept) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, kept) for k, v in value.items()}
    return value


async def call(client: Client, tool: str, params: dict) -> Outcome:
    try:
        result = await client.call_tool(tool, params)
    except MCPError as e:
        return Outcome(True, str(e))
    return Outcome(bool(result.is_error), "\n".join(getattr(c, "text", "") for c in result.content))


def server(toolgate: str, dialect: str, workspace: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=toolgate, args=["--workspace", workspace, "--dialect", dialect, "--approval", "never", "serve"]
    )


async def run_table(run: Run, toolgate: str, workspace: Path, site: str) -> list[tuple[str, str]]:
    """Lists and calls; returns (canonical tool, name called) of every call that succeeded, for the audit."""
    file_data = tomllib.loads((DIALECT_FILES / f"{run.dialect}.toml").read_text())
    canonical = {t["name"]: t["canonical"] for t in file_data["tools"]}
    in_file = set(canonical)
    missing_in_file = {m["name"] for m in file_data.get("missing", [])}
    implemented, not_yet = INVENTORY[run.dialect]
    for found, seed, what in [(in_file, set(implemented), "[[tools]]"), (missing_in_file, set(not_yet), "[[missing]]")]:
        run.expect(found == seed, f"the dialect file's {what} are the seed's (INVENTORY)",
                   f"file only: {sorted(found - seed)}, seed only: {sorted(seed - found)}")

    table = tables(site)[run.dialect]
    run.rows = len(table)
    succeeded: list[tuple[str, str]] = []
    state = State(workspace, {})
    with anyio.fail_after(240):
        async with Client(server(toolgate, run.dialect, str(workspace)), mode="legacy") as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            run.expect(listed == in_file, "tools/list is exactly the dialect file's tools",
                       f"listed only: {sorted(listed - in_file)}, file only: {sorted(in_file - listed)}")
            uncovered = listed - {row.tool for row in table}
            run.expect(not uncovered, "every listed tool has a row in the table", f"no row: {sorted(uncovered)}")
            for row in table:
                params = substitute(row.params, state.kept)
                what = f"{row.tool} {json.dumps(params)}"
                deadline = time.monotonic() + row.retry
                # Backing off as a client should: polled every 0.1 s, a slow exit under load ran
                # into the `process` tool's rate limit (60 calls a minute) before it was seen.
                pause = 0.1
                while True:
                    outcome = await call(client, row.tool, params)
                    try:
                        row.check(outcome, state)
                        problem = None
                    except Fail as e:
                        problem = str(e)
                    except (KeyError, OSError) as e:
                        problem = f"{type(e).__name__}: {e}"
                    if problem is None or time.monotonic() >= deadline:
                        break
                    await anyio.sleep(pause)
                    pause = min(pause * 2, 2.0)
                if problem is None and not outcome.error and row.tool in canonical:
                    succeeded.append((canonical[row.tool], row.tool))
                detail = f"{problem}\n    got: {outcome.text[:1500]!r}"
                if row.gap and problem is None:
                    run.fail(f"known gap no longer reproduces, remove its mark ({row.gap}): {what}"
                             f"\n    got: {outcome.text[:600]!r}")
                elif row.gap:
                    run.gaps.append(f"{what}: {row.gap}")
                    print(f"gap: {what}: {row.gap} ({problem})", flush=True)
                elif problem is None:
                    run.ok(what + (f"\n    got: {outcome.text!r}" if VERBOSE else ""), row=True)
                else:
                    run.fail(f"{what}: {detail}")
    return succeeded


def check_audit(run: Run, toolgate: str, workspace: Path, succeeded: list[tuple[str, str]]) -> None:
    """Every successful call is in the audit log under its canonical tool, `called_as` its name."""
    out = subprocess.run([toolgate, "audit", "--json", "--tail", "10000", "--workspace", str(workspace)],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        run.fail(f"toolgate audit --json: {out.stderr}")
        return
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    seen = {(r["tool"], r.get("called_as")) for r in rows if r.get("outcome") == "ok"}
    missing = sorted({(tool, name if name != tool else None) for tool, name in succeeded} - seen, key=str)
    run.expect(bool(succeeded) and not missing,
               f"the audit log names the canonical tool and the name called ({len(succeeded)} calls)",
               f"no ok row for {missing}")
    read_names = [name for tool, name in succeeded if tool == "read"]
    if read_names:
        want = ("read", read_names[0] if read_names[0] != "read" else None)
        row = next((r for r in rows if (r["tool"], r.get("called_as")) == want), None)
        run.expect(row is not None and f"dialect {run.dialect}" in row.get("decision", ""),
                   f"an audit row has tool `read`, called_as {want[1]!r} and the dialect in its decision",
                   json.dumps(row))


async def check_denied(run: Run, toolgate: str, denied: Path) -> None:
    """`[tools] deny = ["read"]` governs the dialect's name for read."""
    file_data = tomllib.loads((DIALECT_FILES / f"{run.dialect}.toml").read_text())
    read_names = [t["name"] for t in file_data["tools"] if t["canonical"] == "read"]
    others = {t["name"] for t in file_data["tools"] if t["canonical"] != "read"}
    with anyio.fail_after(60):
        async with Client(server(toolgate, run.dialect, str(denied)), mode="legacy") as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            run.expect(bool(read_names) and not listed & set(read_names) and listed == others,
                       f"deny = [\"read\"]: {read_names} not listed, every other tool still is",
                       f"listed: {sorted(listed)}")
            for name in read_names:
                outcome = await call(client, name, {"path": "a.txt"})
                denied_by_rule = "denied by policy" in outcome.text and "`read` in [tools].deny" in outcome.text
                run.expect(outcome.error and denied_by_rule, f"deny = [\"read\"]: `{name}` is refused", outcome.text)


async def main() -> None:
    toolgate, dialect, workspace, denied, port = sys.argv[1:6]
    try:
        httpd = ThreadingHTTPServer(("127.0.0.1", int(port)), Site)
    except OSError as e:
        raise SystemExit(f"cannot serve the test site on 127.0.0.1:{port}: {e}")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    run = Run(dialect)
    succeeded = await run_table(run, toolgate, Path(workspace), f"http://127.0.0.1:{port}")
    check_audit(run, toolgate, Path(workspace), succeeded)
    await check_denied(run, toolgate, Path(denied))
    httpd.shutdown()
    print(json.dumps({"dialect": dialect, "calls": run.rows, "calls_passed": run.rows_passed,
                      "known_gaps": run.gaps, "checks_passed": run.checks_passed, "failed": run.failed}), flush=True)
    if run.failed:
        sys.exit(1)


if __name__ == "__main__":
    anyio.run(main)
