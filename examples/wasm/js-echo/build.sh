#!/bin/sh
# Builds tool.wasm (or $1) beside this script from app.js with jco + componentize-js (npm,
# `@bytecodealliance/jco@1.35.0`, `@bytecodealliance/componentize-js@0.23.0`).
# `cargo xtask deps` installs them into <repo>/.cache/wasm/npm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out="${1:-$here/tool.wasm}"
wit="${TOOLGATE_WIT:-$repo/crates/wasm/wit}"
jco="$repo/.cache/wasm/npm/node_modules/.bin/jco"
[ -x "$jco" ] || jco=$(command -v jco || true)
if [ -z "$jco" ]; then
    echo "error: jco not found; run \`cargo xtask deps\` (or \`npm install @bytecodealliance/jco @bytecodealliance/componentize-js\`)" >&2
    exit 1
fi
# No WASI features the tool does not use: no stdio, clocks, random, HTTP or fetch.
"$jco" componentize "$here/app.js" --wit "$wit" --world-name tool --disable all -o "$out"
echo "built $out"
# The interpreter needs more than the default limits: the sidecar grants them.
echo "install: toolgate wasm install $out --name js-echo --capabilities $here/js-echo.capabilities.json"
