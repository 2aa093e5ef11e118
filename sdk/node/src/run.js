// A run as its handler sees it, and the buffer its log lines and progress go to ax through.
import { requestJson, errorText } from "./client.js";

const FLUSH_EVERY_MS = 500;
const FLUSH_AT_LINES = 100;
const MAX_LINES_PER_POST = 1000; // ax's limit per call
const LOG_RETRIES = 2;

/**
 * Log lines and progress of one run, sent in batches: every 0.5 s or 100 lines, one post at a
 * time so they arrive in order. `target()` names where ({logUrl, callbackToken, attempt}: the
 * newest delivery's, so lines show on the attempt ax waits for). A failing post never fails the run: retried twice, then dropped with a warning.
 */
export class LogSink {
  #lines = [];
  #progress = null; // the last progress set and not yet sent
  #timer = null;
  #sending = Promise.resolve();
  #closed = false; // ax answered 409: the run's log no longer takes lines
  #target;
  #logger;

  constructor(target, logger) {
    this.#target = target;
    this.#logger = logger;
  }

  add(values) {
    for (const value of values) this.#lines.push(...String(value).split(/\r?\n/));
    if (this.#lines.length >= FLUSH_AT_LINES) this.flush();
    else this.#schedule();
  }

  progress(percent) {
    const value = Number(percent);
    if (!Number.isFinite(value)) return;
    this.#progress = Math.round(Math.min(100, Math.max(0, value)));
    this.#schedule();
  }

  /** Sends all that is buffered; resolves once sent (or dropped). */
  flush() {
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#sending = this.#sending.then(() => this.#sendAll());
    return this.#sending;
  }

  #schedule() {
    this.#timer ??= setTimeout(() => this.flush(), FLUSH_EVERY_MS);
  }

  async #sendAll() {
    while (!this.#closed && (this.#lines.length > 0 || this.#progress !== null)) {
      const { callbackToken, attempt } = this.#target();
      const body = { callbackToken, attempt };
      if (this.#lines.length > 0) body.lines = this.#lines.splice(0, MAX_LINES_PER_POST);
      if (this.#progress !== null) body.progress = this.#progress;
      this.#progress = null;
      await this.#post(body);
    }
    if (this.#closed) this.#lines.length = 0;
  }

  async #post(body) {
    const url = this.#target().logUrl;
    for (let tries = 0; ; tries++) {
      let why;
      try {
        const answer = await requestJson(url, body);
        if (answer.status === 200) return;
        if (answer.status === 409) {
          this.#closed = true;
          return;
        }
        why = errorText(answer);
        if (answer.status < 500 && answer.status !== 429) tries = LOG_RETRIES; // no use again
      } catch (err) {
        why = err.cause?.message ?? err.message;
      }
      if (tries >= LOG_RETRIES) {
        this.#logger.warn(`ax-executor: log lines of a run dropped: ${why}`);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** tries));
    }
  }
}

/** What a handler gets: the dispatch's fields, and ways to report as it goes. */
export class Run {
  #flight;

  constructor(flight, dispatch, params) {
    this.#flight = flight;
    this.requestId = dispatch.requestId;
    this.taskId = dispatch.taskId;
    this.scheduledAt = new Date(dispatch.scheduledAt);
    this.params = params;
    this.shardIndex = dispatch.shardIndex ?? 0;
    this.shardTotal = dispatch.shardTotal ?? 1;
    this.signal = flight.abort.signal;
  }

  /** The newest delivery's attempt: a re-delivery while this run works raises it. */
  get attempt() {
    return this.#flight.attempt;
  }

  /** True once the executor began shutting down: a long job should wrap up. */
  get stopping() {
    return this.#flight.stopping();
  }

  log(...lines) {
    this.#flight.sink.add(lines);
  }

  progress(percent) {
    this.#flight.sink.progress(percent);
  }
}
