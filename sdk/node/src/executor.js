// The executor: handlers by path, each dispatch run once (dedupe), its result replied or called
// back, membership of a group, and a graceful shutdown. See docs/protocol.md.
import http from "node:http";
import { MemoryDedupeStore } from "./dedupe.js";
import { errorText, requestJson, sendCallback } from "./client.js";
import { Failed, fromError, fromReturn } from "./result.js";
import { LogSink, Run } from "./run.js";
import { dispatchListener, send } from "./server.js";

const DUPLICATE = { "x-ax-duplicate": "true" };
const SHUTDOWN_RESULT = Object.freeze({
  status: "FAILED",
  code: "EXECUTOR_SHUTDOWN",
  message: "the executor shut down before the run ended",
});
/** How long a shutdown waits for results and log lines still being sent, past the runs. */
const OUTGOING_GRACE_MS = 5_000;
const DEFAULT_HEARTBEAT_SECS = 10;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One run in this process: who to report to (the newest delivery) and who waits for it. */
class Flight {
  waiters = new Map(); // a dispatch's `res` waiting for the result → its reply_within timer
  byCallback = false; // a 202 went out (or a waiting reply was lost): the result is called back
  handlerDone = false;
  abandoned = false; // reported EXECUTOR_SHUTDOWN; whatever the handler does next is ignored
  abort = new AbortController();
  settled = null; // the promise of the whole run, result reported

  constructor(dispatch, axUrl, logger, stopping) {
    this.requestId = dispatch.requestId;
    this.axUrl = axUrl;
    this.stopping = stopping;
    this.take(dispatch);
    this.sink = new LogSink(() => this, logger);
  }

  /** A delivery of this run: the newest attempt is the one ax waits on, so results go there. */
  take(d) {
    if (d.attempt < this.attempt) return;
    this.attempt = d.attempt;
    this.callbackToken = d.callbackToken;
    this.callbackUrl = d.callbackUrl ?? `${this.axUrl}/api/callback`;
    this.logUrl = d.logUrl ?? `${this.axUrl}/api/instances/${encodeURIComponent(this.requestId)}/log`;
  }
}

export class Executor {
  #secret;
  #token;
  #dedupe;
  #logger;
  #handlers = new Map(); // path → {handler, parse, replyWithin}
  #flights = new Set();
  #server = null;
  #closing = false; // dispatches refused with 503
  #stopping = false;
  #stopped = null; // the shutdown's promise, once begun
  #done; // resolved when a shutdown has ended
  #resolveDone;
  #heartbeat = null;
  #beating = Promise.resolve();
  #registered = false;
  #outgoing = new Set(); // callbacks being sent
  #abortOutgoing = new AbortController();

  constructor(options = {}) {
    this.#secret = options.secret ?? process.env.AX_SIGNING_SECRET;
    if (!this.#secret) {
      throw new Error(
        "ax-executor: no signing secret: pass `secret` or set AX_SIGNING_SECRET " +
          "(ax's security.signing_secret); without it anyone could run your handlers",
      );
    }
    this.axUrl = (options.axUrl ?? process.env.AX_URL ?? "http://127.0.0.1:8901").replace(/\/+$/, "");
    this.#token = options.token ?? process.env.AX_EXECUTOR_TOKEN;
    this.group = options.group;
    this.url = options.url;
    this.capacity = options.capacity;
    if (this.group && !this.url)
      throw new Error("ax-executor: a group needs `url`, the URL ax reaches this executor on");
    const url = this.url ? new URL(this.url) : null;
    this.listenPort =
      options.port ?? (url ? Number(url.port || (url.protocol === "https:" ? 443 : 80)) : 9000);
    // A loopback URL is a local executor: listen there only, not on every interface.
    const loopback = url && isLoopback(url.hostname) ? url.hostname.replace(/^\[(.*)\]$/, "$1") : undefined;
    this.listenHost = options.host ?? loopback;
    this.replyWithin = options.replyWithin ?? 2_000;
    this.shutdownGrace = options.shutdownGrace ?? 30_000;
    this.drainDelay = options.drainDelay ?? 2_000;
    this.callbackRetryFor = options.callbackRetryFor ?? 600_000;
    this.#dedupe = options.dedupe === undefined ? new MemoryDedupeStore() : options.dedupe || null;
    this.#logger = options.logger ?? console;
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
  }

  /** Serves `path` with `handler`; `options.params` parses (checks) the params first. */
  handle(path, options, handler) {
    if (typeof options === "function") [options, handler] = [{}, options];
    if (typeof path !== "string" || !path.startsWith("/"))
      throw new TypeError("a handler's path starts with /");
    if (typeof handler !== "function") throw new TypeError("a handler is a function");
    this.#handlers.set(path, {
      handler,
      parse: options.params,
      replyWithin: options.replyWithin ?? this.replyWithin,
    });
    return this;
  }

  /** The port listened on once started (useful with `port: 0`). */
  get port() {
    return this.#server?.address()?.port;
  }

  /** Listens, then joins the group (when one is given). */
  async start() {
    if (this.#server) throw new Error("ax-executor: already started");
    const server = http.createServer(
      dispatchListener({
        secret: this.#secret,
        idempotent: Boolean(this.#dedupe),
        route: (path) => this.#handlers.get(path),
        closing: () => this.#closing,
        onDispatch: (route, dispatch, res) => this.#onDispatch(route, dispatch, res),
        logger: this.#logger,
      }),
    );
    await new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.listenPort, this.listenHost, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.#server = server;
    // After listening, so ax can reach the member as soon as it is one.
    if (this.group) await (this.#beating = this.#beat());
    return this;
  }

  /**
   * start(), then on SIGTERM or SIGINT a graceful stop() and the process's exit. Resolves when
   * stop() was called otherwise.
   */
  async serve() {
    await this.start();
    this.#logger.info?.(
      `ax-executor: listening on port ${this.port} (${[...this.#handlers.keys()].join(", ")})`,
    );
    let signalled = false;
    const onSignal = (signal) => {
      if (signalled) process.exit(1); // a second signal: no more waiting
      signalled = true;
      this.#logger.info?.(`ax-executor: ${signal}, shutting down`);
      this.stop();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    await this.#done;
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    if (signalled) process.exit(0);
  }

  /**
   * Graceful shutdown: leave the group, answer dispatches `drainDelay` more ms, close the
   * listener, give the runs in flight `shutdownGrace` ms, report those still running as
   * EXECUTOR_SHUTDOWN (ax retries them), send what is left to send.
   */
  stop() {
    this.#stopped ??= this.#shutdown().finally(this.#resolveDone);
    return this.#stopped;
  }

  async #onDispatch(route, d, res) {
    let claim = { state: "new" };
    if (this.#dedupe) {
      try {
        claim = await this.#dedupe.claim(d.requestId);
      } catch (err) {
        this.#logger.error(`ax-executor: dedupe store failed on ${d.requestId}: ${err?.message ?? err}`);
        return send(res, 503, { error: "the dedupe store failed" }); // ax tries again later
      }
    }
    switch (claim?.state) {
      case "done":
        return send(res, 200, claim.result, DUPLICATE);
      case "running": {
        // Ours (a re-delivery) or another process's (a shared store): either way, it works.
        const flight = [...this.#flights].find((f) => f.requestId === d.requestId);
        if (flight) {
          flight.take(d);
          flight.byCallback = true;
        }
        return send(res, 202, undefined, DUPLICATE);
      }
      case "new": {
        const flight = new Flight(d, this.axUrl, this.#logger, () => this.#stopping);
        this.#flights.add(flight);
        flight.settled = this.#execute(flight, route, d);
        return this.#waitReply(flight, res, route.replyWithin);
      }
      default:
        this.#logger.error(`ax-executor: the dedupe store's claim gave ${JSON.stringify(claim)}`);
        return send(res, 503, { error: "the dedupe store failed" });
    }
  }

  /** The dispatch's reply waits for the result up to `replyWithin` ms, then is a 202. */
  #waitReply(flight, res, replyWithin) {
    if (replyWithin <= 0) {
      flight.byCallback = true;
      return send(res, 202);
    }
    const timer = setTimeout(() => {
      flight.waiters.delete(res);
      flight.byCallback = true;
      send(res, 202);
    }, replyWithin);
    flight.waiters.set(res, timer);
    // ax hung up (its timeoutMs): the result still counts if called back, e.g. a late success.
    res.on("close", () => {
      if (flight.waiters.delete(res)) {
        clearTimeout(timer);
        flight.byCallback = true;
      }
    });
  }

  async #execute(flight, route, d) {
    let result;
    try {
      let params = d.params;
      if (route.parse) {
        try {
          params = route.parse(d.params);
        } catch (err) {
          throw new Failed("BAD_PARAMS", `params: ${err?.message ?? err}`, { stopRetry: true });
        }
      }
      result = fromReturn(await route.handler(new Run(flight, d, params)));
    } catch (err) {
      result = fromError(err);
    }
    flight.handlerDone = true;
    if (flight.abandoned) return;
    await flight.sink.flush(); // lines before the result, so they are on the run when it ends
    if (this.#dedupe) {
      try {
        await this.#dedupe.finish(flight.requestId, result);
      } catch (err) {
        this.#logger.error(
          `ax-executor: dedupe store failed to keep ${flight.requestId}: ${err?.message ?? err}`,
        );
      }
    }
    this.#flights.delete(flight);
    this.#report(flight, 200, result);
  }

  /** Answers the replies still waiting, and calls the result back if a 202 went out. */
  #report(flight, status, result) {
    for (const [res, timer] of flight.waiters) {
      clearTimeout(timer);
      send(res, status, result);
    }
    flight.waiters.clear();
    if (!flight.byCallback) return;
    const body = {
      requestId: flight.requestId,
      callbackToken: flight.callbackToken,
      attempt: flight.attempt,
      ...result,
    };
    const sending = sendCallback(flight.callbackUrl, body, {
      retryFor: this.callbackRetryFor,
      logger: this.#logger,
      signal: this.#abortOutgoing.signal,
    });
    this.#outgoing.add(sending);
    sending.finally(() => this.#outgoing.delete(sending));
  }

  /** Registers (or renews) the member, then again after the `heartbeatSecs` ax answers. */
  async #beat() {
    let next = DEFAULT_HEARTBEAT_SECS;
    try {
      const answer = await requestJson(
        this.#membersUrl(),
        { url: this.url, capacity: this.capacity },
        { token: this.#token },
      );
      if (answer.status === 200 || answer.status === 201) {
        if (!this.#registered) this.#logger.info?.(`ax-executor: joined group ${this.group} as ${this.url}`);
        this.#registered = true;
        next = answer.body?.heartbeatSecs ?? next;
      } else {
        this.#logger.error(`ax-executor: registration in group ${this.group} refused: ${errorText(answer)}`);
      }
    } catch (err) {
      // ax may be restarting: the next beat tries again.
      this.#logger.warn(
        `ax-executor: heartbeat to ${this.axUrl} failed: ${err.cause?.message ?? err.message}`,
      );
    }
    if (this.#stopping) return;
    this.#heartbeat = setTimeout(() => (this.#beating = this.#beat()), next * 1000);
    this.#heartbeat.unref(); // the listener keeps the process alive, not the heartbeat
  }

  async #leave() {
    const url = `${this.#membersUrl()}?url=${encodeURIComponent(this.url)}`;
    try {
      const answer = await requestJson(url, undefined, { method: "DELETE", token: this.#token });
      if (answer.status !== 204 && answer.status !== 404) {
        this.#logger.warn(`ax-executor: leaving group ${this.group} refused: ${errorText(answer)}`);
      }
    } catch (err) {
      this.#logger.warn(
        `ax-executor: leaving group ${this.group} failed: ${err.cause?.message ?? err.message}`,
      );
    }
  }

  #membersUrl() {
    return `${this.axUrl}/api/executors/${encodeURIComponent(this.group)}/members`;
  }

  async #shutdown() {
    this.#stopping = true;
    clearTimeout(this.#heartbeat);
    await this.#beating; // a beat under way would register the member again
    if (this.#registered) await this.#leave();
    if (!this.#server) return;
    // Dispatches routed just before the removal still arrive for a moment.
    await sleep(this.drainDelay);
    this.#closing = true;
    const closed = new Promise((resolve) => this.#server.close(resolve));
    this.#server.closeIdleConnections();

    const running = () => [...this.#flights].map((flight) => flight.settled);
    let graceTimer;
    await Promise.race([
      Promise.all(running()),
      new Promise((resolve) => (graceTimer = setTimeout(resolve, this.shutdownGrace))),
    ]);
    clearTimeout(graceTimer);
    const late = [...this.#flights].filter((flight) => !flight.handlerDone);
    await Promise.all(late.map((flight) => this.#abandon(flight)));
    await Promise.all(running()); // those that were reporting their result

    let outgoingTimer;
    await Promise.race([
      Promise.all(this.#outgoing),
      new Promise((resolve) => (outgoingTimer = setTimeout(resolve, OUTGOING_GRACE_MS))),
    ]);
    clearTimeout(outgoingTimer);
    this.#abortOutgoing.abort();
    this.#server.closeAllConnections();
    await closed;
  }

  /** A run past the grace: told to stop, reported EXECUTOR_SHUTDOWN, forgotten for a retry. */
  async #abandon(flight) {
    flight.abandoned = true;
    flight.abort.abort();
    this.#flights.delete(flight);
    if (this.#dedupe) {
      try {
        await this.#dedupe.release(flight.requestId);
      } catch (err) {
        this.#logger.error(
          `ax-executor: dedupe store failed to release ${flight.requestId}: ${err?.message ?? err}`,
        );
      }
    }
    await flight.sink.flush();
    // A reply still waiting answers 503: a failed attempt ax retries.
    this.#report(flight, 503, SHUTDOWN_RESULT);
  }
}

function isLoopback(hostname) {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}
