#!/bin/sh
# Builds tool.wasm (or $1) beside this script from app.py with componentize-py (PyPI,
# `componentize-py==0.25.1`). `cargo xtask deps` installs it into <repo>/.cache/wasm/venv.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out="${1:-$here/tool.wasm}"
wit="${TOOLGATE_WIT:-$repo/crates/wasm/wit}"
cpy="$repo/.cache/wasm/venv/bin/componentize-py"
[ -x "$cpy" ] || cpy=$(command -v componentize-py || true)
if [ -z "$cpy" ]; then
    echo "error: componentize-py not found; run \`cargo xtask deps\` (or \`pip install componentize-py==0.25.1\`)" >&2
    exit 1
fi
cd "$here"
"$cpy" -d "$wit" -w tool componentize app -o "$out"
echo "built $out"
# The interpreter needs more than the default limits: the sidecar grants them.
echo "install: toolgate wasm install $out --name python-http --capabilities $here/python-http.capabilities.json"
