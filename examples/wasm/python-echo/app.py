"""An echo tool for toolgate, written in Python and built into a WebAssembly component
with componentize-py (see build.sh). Copy this folder to start your own tool."""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import log


class WitWorld(wit_world.WitWorld):
    def describe(self) -> wit_world.Description:
        return wit_world.Description(
            name="python-echo",
            description="Returns the `text` it is given, unchanged. Written in Python.",
            input_schema=json.dumps(
                {
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "What to echo."}},
                    "required": ["text"],
                    "additionalProperties": False,
                }
            ),
            annotations=wit_world.Annotations(
                read_only=True, destructive=False, idempotent=True, open_world=False
            ),
        )

    def execute(self, params: str) -> str:
        try:
            args = json.loads(params)
        except ValueError as e:
            raise Err(f"parameters are not JSON: {e}")
        text = args.get("text")
        if not isinstance(text, str):
            raise Err("`text` must be a string")
        log.log(log.Level.DEBUG, f"echoing {len(text)} characters")
        return text
