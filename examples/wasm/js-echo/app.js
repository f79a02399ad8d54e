// An echo tool for toolgate, written in JavaScript and built into a WebAssembly component
// with jco + componentize-js (see build.sh). Copy this folder to start your own tool.

import { log } from 'toolgate:tool/log@0.1.0';

export function describe() {
  return {
    name: 'js-echo',
    description: 'Returns the `text` it is given, unchanged. Written in JavaScript.',
    inputSchema: JSON.stringify({
      type: 'object',
      properties: { text: { type: 'string', description: 'What to echo.' } },
      required: ['text'],
      additionalProperties: false,
    }),
    annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },
  };
}

// Returning a string is `ok`; throwing one is `err` (a message for the model).
export function execute(params) {
  let args;
  try {
    args = JSON.parse(params);
  } catch (e) {
    throw `parameters are not JSON: ${e}`;
  }
  if (typeof args.text !== 'string') {
    throw '`text` must be a string';
  }
  log('debug', `echoing ${args.text.length} characters`);
  return args.text;
}
