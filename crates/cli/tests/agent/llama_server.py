"""Serves a GGUF model with llama.cpp's OpenAI-compatible server (PyPI xllamacpp) on loopback.

Usage: python llama_server.py MODEL.gguf [--embedding] [--api-key KEY]
With --embedding it serves `/v1/embeddings` (mean pooling) instead of chat; with --api-key it
refuses requests without `Authorization: Bearer KEY`. Prints `listening http://127.0.0.1:PORT` once it accepts requests, then serves until stdin
closes (the test's end), so the server never outlives its test.
"""

import socket
import sys

import xllamacpp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx = 8192
    params.n_parallel = 2
    params.hostnames = ["127.0.0.1"]
    params.port = free_port()
    params.use_jinja = True
    params.sampling.temp = 0.0
    args = sys.argv[2:]
    if "--embedding" in args:
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    if "--api-key" in args:
        params.api_keys = [args[args.index("--api-key") + 1]]
    server = xllamacpp.Server(params)
    print(f"listening http://127.0.0.1:{params.port}", flush=True)
    sys.stdin.read()
    del server


if __name__ == "__main__":
    main()
