"""Checks `toolgate tools --format openai` against the OpenAI Agents SDK's strict-mode converter.

Reads the JSON array of function tools on stdin, or an object of such arrays keyed by a label
(one per dialect: the SDK is imported once for all of them). Every function must be exported with
`"strict": true`, and its `parameters` must go through the SDK's `ensure_strict_json_schema`
(the function the SDK runs before it sends a tool in strict mode) without an error and without a
change: a schema the SDK has to rewrite (a missing `required` entry, an object left open) is not
strict as exported. Prints one line per failure and a count per export, and exits 1 on any
failure, 0 when every tool passes.

    target/debug/toolgate tools --profile full --format openai | python openai_strict.py
"""

import copy
import inspect
import json
import sys

from agents.strict_schema import ensure_strict_json_schema


def differences(before, after, at=""):
    """Where `after` differs from `before`, as JSON-pointer-like paths."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after)):
            if key not in after:
                out.append(f"{at}/{key}: removed")
            elif key not in before:
                out.append(f"{at}/{key}: added {json.dumps(after[key])}")
            else:
                out.extend(differences(before[key], after[key], f"{at}/{key}"))
        return out
    if at.endswith("/required") and isinstance(before, list) and isinstance(after, list):
        # The SDK lists the properties in their order; `required` is a set.
        added = [n for n in after if n not in before]
        dropped = [n for n in before if n not in after]
        if added or dropped:
            return [f"{at}: {json.dumps(before)} became {json.dumps(after)}"]
        return []
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (b, a) in enumerate(zip(before, after)):
            out.extend(differences(b, a, f"{at}/{i}"))
        return out
    if before != after or type(before) is not type(after):
        return [f"{at or '/'}: {json.dumps(before)} became {json.dumps(after)}"]
    return []


def check(tools, strict_kwargs, label):
    """Prints each failing tool of one export and its count; returns how many failed."""
    prefix = f"{label}: " if label else ""
    if not isinstance(tools, list) or not tools:
        print(f"{prefix}expected a non-empty JSON array of tools")
        return 1
    failures = 0
    for tool in tools:
        function = tool.get("function", {})
        name = function.get("name", "?")
        problems = []
        if tool.get("type") != "function":
            problems.append(f"`type` is {json.dumps(tool.get('type'))}, not \"function\"")
        if function.get("strict") is not True:
            problems.append(f"exported with \"strict\": {json.dumps(function.get('strict'))}")
        parameters = function.get("parameters")
        if not isinstance(parameters, dict):
            problems.append("no `parameters` object")
        else:
            try:
                converted = ensure_strict_json_schema(copy.deepcopy(parameters), **strict_kwargs)
            except Exception as e:  # the SDK raises UserError, TypeError, ValueError
                problems.append(f"ensure_strict_json_schema refused it: {type(e).__name__}: {e}")
            else:
                changed = differences(parameters, converted)
                if changed:
                    problems.append("ensure_strict_json_schema had to change it: " + "; ".join(changed))
        for problem in problems:
            print(f"{prefix}{name}: {problem}")
        failures += bool(problems)
    print(f"{prefix}{len(tools) - failures} passed, {failures} failed")
    return failures


def main():
    exports = json.load(sys.stdin)
    if not isinstance(exports, dict):
        exports = {"": exports}
    if not exports:
        print("expected tools on stdin")
        return 1
    # The SDK's MCP path converts with `_reject_open_objects=True`; use it where the SDK has it.
    strict_kwargs = {}
    if "_reject_open_objects" in inspect.signature(ensure_strict_json_schema).parameters:
        strict_kwargs["_reject_open_objects"] = True
    failures = sum(check(tools, strict_kwargs, label) for label, tools in exports.items())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
