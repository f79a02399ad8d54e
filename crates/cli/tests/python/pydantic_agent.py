"""A Pydantic AI agent with toolgate as its MCP toolset (stdio), for crates/cli/tests/it/clients.rs.

Usage: pydantic_agent.py SCRIPT_JSON PAGE_URL TOOLGATE WORKSPACE. The model is a `FunctionModel`
that makes the scripted calls one per turn (the tool whose name is the script's) and records the
`ToolReturnPart`s it is handed, as a real model adapter would send them
(`model_response_str()`). Prints {"records": [...], "output": ...} as JSON on its last line
(`output` says why when the run failed).
"""

import asyncio
import json
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

SCRIPT, PAGE_URL, TOOLGATE, WORKSPACE = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
records = []


def model(messages, info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    for part in returns[len(records):]:
        records.append({"api": "pydantic-ai", "tool": part.tool_name, "call_id": part.tool_call_id,
                        "content": part.model_response_str()})
    if len(returns) >= len(SCRIPT):
        return ModelResponse(parts=[TextPart("All five tools answered.")])
    step = SCRIPT[len(returns)]
    offered = [t.name for t in info.function_tools]
    if step["tool"] not in offered:
        return ModelResponse(parts=[TextPart(f"The tool {step['tool']!r} is not offered (offered: {offered}).")])
    args = json.loads(json.dumps(step["args"]).replace("{PAGE_URL}", PAGE_URL))
    return ModelResponse(parts=[ToolCallPart(step["tool"], args, tool_call_id=f"call_step{len(returns)}")])


async def main():
    toolgate = MCPToolset(StdioTransport(command=TOOLGATE, args=["--workspace", WORKSPACE, "serve"]))
    agent = Agent(FunctionModel(model), toolsets=[toolgate])
    try:
        async with agent:
            output = (await agent.run("Read notes.txt, grep for PELICAN, list and glob the files, fetch the page.")).output
    except Exception as e:  # reported with what the model was handed before
        output = f"the run failed: {type(e).__name__}: {e}"
    print(json.dumps({"records": records, "output": output}))


asyncio.run(main())
