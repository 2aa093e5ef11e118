// Types of ax-executor (hand-written: the package is plain JavaScript, no build step).
// The protocol they speak: ../../docs/protocol.md.

/** A result as ax takes it, in a reply or a callback. */
export interface Result {
  status: "SUCCESS" | "FAILED";
  code?: string | number;
  message?: string;
  output?: string;
  stopRetry?: boolean;
}

/** What a handler may return for a success: nothing, a message, or more. */
export type Success =
  void | undefined | null | string | { code?: string | number; message?: string; output?: string };

/** What a handler gets for one run. */
export interface Run<P = unknown> {
  /** The run's id, the same on every delivery: key the work on it. */
  readonly requestId: string;
  readonly taskId: number;
  /** The newest delivery's attempt, from 1 (a re-delivery while the run works raises it). */
  readonly attempt: number;
  /** The fire time the run is for. */
  readonly scheduledAt: Date;
  /** The task's params, as the handler's `params` parser returned them. */
  readonly params: P;
  /** A BROADCAST task's shard of the fire, from 0; 0 otherwise. */
  readonly shardIndex: number;
  /** How many shards the fire has; 1 otherwise. */
  readonly shardTotal: number;
  /** True once the executor began shutting down: a long job should wrap up. */
  readonly stopping: boolean;
  /** Aborted when the run is given up (past the shutdown grace): pass it to fetch and the like. */
  readonly signal: AbortSignal;
  /** Log lines (one per newline), sent to ax in batches; shown on the run. */
  log(...lines: unknown[]): void;
  /** The run's progress, 0-100. */
  progress(percent: number): void;
}

export type Handler<P = unknown> = (run: Run<P>) => Success | Failed | Promise<Success | Failed>;

export interface HandlerOptions<P = unknown> {
  /** Parses (checks) the raw params; throwing makes the run FAILED `BAD_PARAMS`, not retried. */
  params?: (raw: unknown) => P;
  /** How long the dispatch's reply waits for the result, in ms, before answering 202. */
  replyWithin?: number;
}

/** What `claim` says of a requestId. */
export type Claim = { state: "new" } | { state: "running" } | { state: "done"; result: Result };

/** Where requestIds and their results are kept: in memory by default, or your own. */
export interface DedupeStore {
  /** Takes the requestId if it is new; else says whether it runs or what it came to. */
  claim(requestId: string): Claim | Promise<Claim>;
  /** Keeps the result of a run that ended. */
  finish(requestId: string, result: Result): void | Promise<void>;
  /** Forgets a run that did not end (shutdown), so a re-delivery runs it again. */
  release(requestId: string): void | Promise<void>;
}

export interface Logger {
  info?(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface ExecutorOptions {
  /** ax's `security.signing_secret`; default `AX_SIGNING_SECRET`. Required. */
  secret?: string;
  /** ax's API, for registration and when a dispatch names no callbackUrl/logUrl; default `AX_URL`, else `http://127.0.0.1:8901`. */
  axUrl?: string;
  /** Bearer token for registration and removal; default `AX_EXECUTOR_TOKEN`. */
  token?: string;
  /** The executor group to join (registration, heartbeats, removal on shutdown). */
  group?: string;
  /** The base URL ax reaches this executor on; required with `group`. */
  url?: string;
  /** Most runs ax sends this member at once. */
  capacity?: number;
  /** Port to listen on; default `url`'s port, else 9000 (0: any free one, see `port`). */
  port?: number;
  /** Address to listen on; default `url`'s host when it is loopback, else every interface. */
  host?: string;
  /** ms a dispatch's reply waits for the handler before a 202 and a callback; default 2000, 0 always 202. */
  replyWithin?: number;
  /** The requestId store; default a `MemoryDedupeStore`; `false` runs every delivery. */
  dedupe?: DedupeStore | false | null;
  /** ms the runs in flight get to end on shutdown; default 30000. */
  shutdownGrace?: number;
  /** ms dispatches are still taken after leaving the group; default 2000. */
  drainDelay?: number;
  /** ms a result is sent again (with back-off) while ax cannot take it; default 600000. */
  callbackRetryFor?: number;
  /** Where the SDK's own messages go; default `console`. */
  logger?: Logger;
}

export class Executor {
  constructor(options?: ExecutorOptions);
  readonly axUrl: string;
  readonly group: string | undefined;
  readonly url: string | undefined;
  /** The port listened on once started. */
  readonly port: number | undefined;
  /** Serves `path` (e.g. "/reconcile") with `handler`. */
  handle<P = unknown>(path: string, handler: Handler<P>): this;
  handle<P>(path: string, options: HandlerOptions<P>, handler: Handler<P>): this;
  /** Listens, then joins the group when one is given. */
  start(): Promise<this>;
  /** start(), then on SIGTERM/SIGINT a graceful stop() and the process's exit. */
  serve(): Promise<void>;
  /** Graceful shutdown; the same promise however often it is called. */
  stop(): Promise<void>;
}

/** A failure with a code of your own: throw (or return) it from a handler. */
export class Failed extends Error {
  constructor(code: string | number, message?: string, options?: { stopRetry?: boolean; output?: string });
  readonly code: string | number;
  readonly stopRetry: boolean;
  readonly output: string | undefined;
}

/** The default store: in memory, results kept `ttl` ms (24 h) and at most `maxEntries` (100,000). */
export class MemoryDedupeStore implements DedupeStore {
  constructor(options?: { ttl?: number; maxEntries?: number; now?: () => number });
  claim(requestId: string): Claim;
  finish(requestId: string, result: Result): void;
  release(requestId: string): void;
  readonly size: number;
}

type FieldType = "string" | "number" | "boolean" | "object" | "array";
type TypeOf<T> = T extends "string"
  ? string
  : T extends "number"
    ? number
    : T extends "boolean"
      ? boolean
      : T extends "array"
        ? unknown[]
        : T extends "object"
          ? Record<string, unknown>
          : never;
type Fields = Record<string, FieldType | `${FieldType}?`>;
type Required_<F extends Fields> = { [K in keyof F as F[K] extends `${string}?` ? never : K]: TypeOf<F[K]> };
type Optional_<F extends Fields> = {
  [K in keyof F as F[K] extends `${string}?` ? K : never]?: F[K] extends `${infer T}?` ? TypeOf<T> : never;
};
export type ShapeOf<F extends Fields> = Required_<F> & Optional_<F>;

/** A params parser for a flat object: `shape({region: "string", limit: "number?"})`. */
export function shape<F extends Fields>(fields: F): (raw: unknown) => ShapeOf<F>;

/** The `X-Ax-Signature` ax sends for `body` signed at `timestamp` (Unix seconds). */
export function sign(secret: string, timestamp: number | string, body: string | Uint8Array): string;

/** null when the signature headers fit the body and are fresh (±300 s), else why not. */
export function verify(
  secret: string,
  dispatch: { timestamp?: string; signature?: string; body: string | Uint8Array; now?: number },
): string | null;

/** The wait in ms before retry `n` (from 0) of a callback: 0.5 s doubling to 30 s, jittered. */
export function backoffDelay(
  n: number,
  options?: { initial?: number; max?: number; random?: () => number },
): number;
