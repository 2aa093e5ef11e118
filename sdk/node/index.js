// ax-executor: run ax's dispatches in Node. See README.md and ../../docs/protocol.md.
export { Executor } from "./src/executor.js";
export { Failed } from "./src/result.js";
export { MemoryDedupeStore } from "./src/dedupe.js";
export { shape } from "./src/shape.js";
export { sign, verify } from "./src/signature.js";
export { backoffDelay } from "./src/client.js";
