"""Serves a GGUF model with llama.cpp's OpenAI-compatible server (PyPI xllamacpp) on loopback.

Usage: python llama_server.py MODEL.gguf [--embedding] [--api-key KEY]
With --embedding it serves `/v1/embeddings` (mean pooling) instead of chat; with --api-key it
refuses requests without `Authorization: Bearer KEY`. Prints `listening http://127.0.0.1:PORT` once it accepts requests, then serves until stdin
closes (the test's end), so the server never outlives its test.
"""

import random
import socket
import sys

import xllamacpp


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range (where outgoing connections take
    their local ports), at random so that tests running side by side rarely pick the same."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        below = int(f.read().split()[0])
    while True:
        port = random.randrange(1024, below)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def start(params: "xllamacpp.CommonParams") -> "xllamacpp.Server":
    """Starts the server on a free port, again on another when one was taken before it bound."""
    failures = []
    for _ in range(8):
        params.port = free_port()
        try:
            return xllamacpp.Server(params)
        except Exception as e:  # noqa: BLE001 - xllamacpp raises its own types
            failures.append(f"port {params.port}: {e}")
    raise SystemExit("llama.cpp server did not start:\n" + "\n".join(failures))


def main() -> None:
    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx = 8192
    params.n_parallel = 2
    params.hostnames = ["127.0.0.1"]
    params.use_jinja = True
    params.sampling.temp = 0.0
    args = sys.argv[2:]
    if "--embedding" in args:
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    if "--api-key" in args:
        params.api_keys = [args[args.index("--api-key") + 1]]
    server = start(params)
    print(f"listening http://127.0.0.1:{params.port}", flush=True)
    sys.stdin.read()
    del server


if __name__ == "__main__":
    main()
