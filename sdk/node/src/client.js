// What the executor sends ax: results (callbacks, retried with back-off), log lines, and its
// group membership. Global fetch, no dependency.

/** How long one request to ax may take before it counts as failed (and may be retried). */
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * The wait before retry number `n` (from 0) of a callback: 0.5 s doubling to 30 s, each
 * drawn between half and all of it, so executors that lost ax together do not all come back
 * in the same instant.
 */
export function backoffDelay(n, { initial = 500, max = 30_000, random = Math.random } = {}) {
  const ceiling = Math.min(max, initial * 2 ** Math.min(n, 30));
  return ceiling / 2 + (random() * ceiling) / 2;
}

/** POSTs (or sends `method`) JSON; resolves to `{status, body}`, rejects on no answer. */
export async function requestJson(url, body, { method = "POST", token, signal } = {}) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  });
  // Read to the end, so the kept-alive connection can carry the next call.
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed };
}

/** ax's error message from an error answer, for the log. */
export function errorText({ status, body }) {
  return `HTTP ${status}: ${body?.error?.message ?? JSON.stringify(body)}`;
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/**
 * Sends a result to ax until it is taken: 200 → done; 400/403/404/409 → never (sending the
 * same body again fails again); 429, 5xx, no connection → again with back-off, for up to
 * `retryFor` ms. Resolves to whether ax took it; never rejects. `signal` ends the retries.
 */
export async function sendCallback(url, body, { retryFor, logger, signal, delay = backoffDelay }) {
  const giveUpAt = Date.now() + retryFor;
  for (let n = 0; ; n++) {
    let why;
    try {
      const answer = await requestJson(url, body, { signal });
      if (answer.status === 200) return true;
      if (answer.status !== 429 && answer.status < 500) {
        logger.error(`ax-executor: ax refused the result of ${body.requestId}: ${errorText(answer)}`);
        return false;
      }
      why = errorText(answer);
    } catch (err) {
      why = err.cause?.message ?? err.message;
    }
    const wait = delay(n);
    if (signal?.aborted || Date.now() + wait > giveUpAt) {
      logger.error(`ax-executor: result of ${body.requestId} not delivered, giving up: ${why}`);
      return false;
    }
    logger.warn(`ax-executor: result of ${body.requestId} not delivered (${why}), retrying`);
    await sleep(wait, signal);
  }
}
