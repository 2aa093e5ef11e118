// A handler's outcome as the protocol's result body: {status, code?, message?, output?,
// stopRetry?}, cut to the sizes ax takes, since ax refuses a callback whose fields are too long
// (and the result would be lost) where it would merely cut a reply's.

const MAX_CODE = 64;
const MAX_MESSAGE = 1024;
const MAX_OUTPUT_BYTES = 64 * 1024;

/** A run's failure with a code of your own: throw it (or return it) from a handler. */
export class Failed extends Error {
  constructor(code, message = "", { stopRetry = false, output } = {}) {
    super(message || String(code));
    this.name = "Failed";
    this.code = code;
    this.stopRetry = stopRetry;
    this.output = output;
  }
}

/** Turns what a handler returned into a result. */
export function fromReturn(value) {
  if (value instanceof Failed) return fromError(value);
  if (value === undefined || value === null) return { status: "SUCCESS" };
  if (typeof value === "string") return clean({ status: "SUCCESS", message: value });
  if (typeof value === "object") {
    const { code, message, output } = value;
    return clean({ status: "SUCCESS", code, message, output });
  }
  return clean({ status: "SUCCESS", message: String(value) });
}

/** Turns what a handler threw (or a promise rejected with) into a result. */
export function fromError(err) {
  if (err instanceof Failed) {
    const { code, message, stopRetry, output } = err;
    return clean({ status: "FAILED", code, message, output, stopRetry: stopRetry || undefined });
  }
  const message = err instanceof Error ? err.message || err.name : String(err);
  return clean({ status: "FAILED", code: "ERROR", message });
}

function clean({ status, code, message, output, stopRetry }) {
  const result = { status };
  if (code !== undefined && code !== null) {
    // An integer is taken as it is (XXL-Job style `0`); anything else becomes text ax takes.
    result.code = Number.isSafeInteger(code) ? code : cut(String(code).replace(/\p{Cc}/gu, ""), MAX_CODE);
  }
  if (message !== undefined && message !== null) result.message = cut(String(message), MAX_MESSAGE);
  if (output !== undefined && output !== null) result.output = lastBytes(String(output), MAX_OUTPUT_BYTES);
  if (stopRetry) result.stopRetry = true;
  return result;
}

/** The first `max` characters of `text` (as ax counts them: code points), well-formed. */
function cut(text, max) {
  text = text.toWellFormed(); // a lone surrogate is no JSON ax can read
  return text.length <= max ? text : Array.from(text).slice(0, max).join("");
}

/** The end of `text` within `max` UTF-8 bytes: a job's last output matters most. */
function lastBytes(text, max) {
  const bytes = Buffer.from(text);
  if (bytes.length <= max) return text.toWellFormed();
  let start = bytes.length - max;
  while (start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++; // not mid-character
  return bytes.subarray(start).toString();
}
