"""An HTTP tool for toolgate, written in Python and built into a WebAssembly component with
componentize-py (see build.sh). It sends one request through the host's `http.send` and
returns the status, headers and body as JSON.

The host decides everything that matters: the request must match the tool's `http`
capability (host, path prefix, method, https), credentials are added by the host (this code
never sees them), and the response comes back with credential headers stripped and secrets
redacted. Install it with, for example:

    toolgate wasm install tool.wasm --name python-http --capabilities python-http.capabilities.json
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import http, log


class WitWorld(wit_world.WitWorld):
    def describe(self) -> wit_world.Description:
        return wit_world.Description(
            name="python-http",
            description="Sends one HTTP request to an endpoint this tool is allowed to call and "
            "returns {status, headers, body}. Written in Python.",
            input_schema=json.dumps(
                {
                    "type": "object",
                    "properties": {
                        "url": {"type": "string", "description": "The absolute URL."},
                        "method": {"type": "string", "description": "GET (default), POST, ..."},
                        "headers": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                            "description": "Request headers.",
                        },
                        "body": {"type": "string", "description": "The request body."},
                    },
                    "required": ["url"],
                    "additionalProperties": False,
                }
            ),
            annotations=wit_world.Annotations(
                read_only=False, destructive=False, idempotent=False, open_world=True
            ),
        )

    def execute(self, params: str) -> str:
        try:
            args = json.loads(params)
        except ValueError as e:
            raise Err(f"parameters are not JSON: {e}")
        body = args.get("body")
        request = http.Request(
            method=args.get("method", "GET"),
            url=args["url"],
            headers=list((args.get("headers") or {}).items()),
            body=None if body is None else body.encode("utf-8"),
        )
        log.log(log.Level.DEBUG, f"{request.method} {request.url}")
        # A refusal or a network failure raises Err(message); let it through as the tool's error.
        response = http.send(request)
        return json.dumps(
            {
                "status": response.status,
                "headers": [[k, v] for (k, v) in response.headers],
                "body": response.body.decode("utf-8", errors="replace"),
            }
        )
