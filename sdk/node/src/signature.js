// Dispatch signatures (docs/protocol.md, "Verifying the signature"): ax signs
// "{X-Ax-Timestamp}.{body}" with HMAC-SHA256 keyed by the shared secret.
import { createHmac, timingSafeEqual } from "node:crypto";

/** Longest distance between ax's clock and ours, either way, before a dispatch is stale. */
export const MAX_SKEW_SECS = 300;

/** The `X-Ax-Signature` value ax sends for `body` signed at `timestamp` (Unix seconds). */
export function sign(secret, timestamp, body) {
  return `v1=${createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex")}`;
}

/**
 * Checks a dispatch's signature headers against its raw body (the bytes as received, before
 * any JSON parsing). Returns `null` when it is genuine and fresh, else why it is refused.
 */
export function verify(secret, { timestamp, signature, body, now = Date.now() / 1000 }) {
  if (!timestamp || !signature) return "missing X-Ax-Timestamp or X-Ax-Signature";
  if (!/^\d{1,12}$/.test(timestamp)) return "X-Ax-Timestamp is not Unix seconds";
  // The signature first, so a forged dispatch learns nothing about our clock.
  const expected = Buffer.from(sign(secret, timestamp, body));
  const given = Buffer.from(signature);
  // timingSafeEqual wants equal lengths; a signature's length is no secret.
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return "signature does not match";
  }
  if (Math.abs(now - Number(timestamp)) > MAX_SKEW_SECS) {
    return `timestamp more than ${MAX_SKEW_SECS} s from this executor's clock`;
  }
  return null;
}
