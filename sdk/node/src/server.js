// The HTTP side of a dispatch: route, read the body, check the signature, parse. What to do
// with a genuine dispatch is the executor's (`onDispatch`).
import { verify } from "./signature.js";

export const MAX_BODY_BYTES = 1024 * 1024;

/** Answers with a JSON body (or none when `body` is undefined). */
export function send(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  if (body === undefined) {
    res.writeHead(status, { ...headers, "content-length": 0 });
    return res.end();
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * A `(req, res)` listener for node:http. `route(path)` gives a path's handler (or undefined),
 * `closing()` whether dispatches are refused (shutdown), `onDispatch(route, dispatch, res)`
 * takes a genuine, parsed one.
 */
export function dispatchListener({ secret, idempotent, route, closing, onDispatch, logger }) {
  return (req, res) => {
    res.setHeader("x-ax-protocol", "1");
    if (idempotent) res.setHeader("x-ax-idempotent", "true");
    const path = new URL(req.url, "http://executor").pathname;
    const handler = route(path);
    if (!handler) return send(res, 404, { error: `no handler at ${path}` });
    if (req.method !== "POST") return send(res, 405, { error: "only POST" }, { allow: "POST" });
    if (Number(req.headers["content-length"]) > MAX_BODY_BYTES) return tooLarge(req, res);

    const chunks = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (!res.headersSent) tooLarge(req, res);
    });
    req.on("end", () => {
      if (size > MAX_BODY_BYTES) return;
      const body = Buffer.concat(chunks);
      const refused = verify(secret, {
        timestamp: req.headers["x-ax-timestamp"],
        signature: req.headers["x-ax-signature"],
        body,
      });
      if (refused) {
        logger.warn(`ax-executor: dispatch to ${path} refused: ${refused}`);
        return send(res, 401, { error: refused });
      }
      let dispatch;
      try {
        dispatch = JSON.parse(body.toString("utf8"));
      } catch {
        return send(res, 400, { error: "the body is no JSON" });
      }
      const wrong = malformed(dispatch);
      if (wrong) return send(res, 400, { error: wrong });
      // Refused only now, so a forged dispatch cannot tell a shutting-down executor apart.
      if (closing()) return send(res, 503, { error: "shutting down" }, { connection: "close" });
      onDispatch(handler, dispatch, res);
    });
  };
}

function tooLarge(req, res) {
  send(res, 413, { error: `body over ${MAX_BODY_BYTES} bytes` }, { connection: "close" });
  req.resume(); // the rest is read and dropped: closing mid-body could lose this answer
}

/** Why a signed body is no dispatch this executor can act on, or null. */
function malformed(d) {
  if (typeof d !== "object" || d === null || Array.isArray(d)) return "the body is no object";
  if (typeof d.requestId !== "string" || !d.requestId) return "requestId must be a string";
  if (!Number.isSafeInteger(d.attempt) || d.attempt < 1) return "attempt must be a positive integer";
  if (typeof d.callbackToken !== "string") return "callbackToken must be a string";
  return null;
}
