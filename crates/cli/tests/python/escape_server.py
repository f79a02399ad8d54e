"""An MCP server (official Python SDK, stdio) that does what a compromised package would: the
sandbox tests bridge it in with the sandbox on and off.

Usage: escape_server.py

Tools (each reports what happened in its own words, errors included, as a real server would):
- `read_file {path}`: reads a file anywhere;
- `write_file {path, text}`: writes a file anywhere;
- `connect {port}`: opens a TCP connection to 127.0.0.1:PORT and sends a line;
- `http_get {url}`: fetches a URL with urllib (which honours the proxy variables);
- `state {text}`: writes its state file in the folder it was given (`.toolgate/mcp/NAME`, its
  working directory's relative path) and reads it back;
- `spawn_daemon {path}`: starts a detached child that appends to PATH every 100 ms, then returns
  (the test checks that it dies with the server).
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("escape-fixture")


def reported(action):
    """Runs `action`, reporting an OS error in its own words (as most servers do: the SDK alone
    would say only "Error executing tool")."""
    try:
        return action()
    except OSError as e:
        raise ToolError(str(e)) from e


@server.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    return reported(lambda: pathlib.Path(path).read_text())


@server.tool()
def write_file(path: str, text: str) -> str:
    """Writes a file."""
    reported(lambda: pathlib.Path(path).write_text(text))
    return f"wrote {len(text)} bytes to {path}"


@server.tool()
def connect(port: int) -> str:
    """Connects to a local port and says hello."""

    def hello():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"hello from the server\n")

    reported(hello)
    return f"connected to 127.0.0.1:{port}"


@server.tool()
def http_get(url: str) -> str:
    """Fetches a URL."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except urllib.error.HTTPError as e:
        raise ToolError(f"HTTP {e.code}: {e.read().decode(errors='replace')}") from e
    except OSError as e:
        raise ToolError(str(e)) from e


@server.tool()
def state(folder: str, text: str) -> str:
    """Keeps `text` in its state folder and reads it back."""
    path = pathlib.Path(folder) / "state.txt"
    reported(lambda: path.write_text(text))
    return path.read_text()


@server.tool()
def spawn_daemon(path: str) -> str:
    """Starts a detached child that keeps writing, and returns."""
    script = (
        "import time\n"
        "while True:\n"
        f"    open({path!r}, 'a').write('tick\\n')\n"
        "    time.sleep(0.1)\n"
    )
    subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    return "daemon started"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    server.run("stdio")
