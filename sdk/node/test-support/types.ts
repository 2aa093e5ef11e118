// Compiled (never run) by test/types.test.js: the types say what the README says.
import {
  Executor,
  Failed,
  MemoryDedupeStore,
  shape,
  type Claim,
  type DedupeStore,
  type Result,
  type Run,
} from "ax-executor";

const executor = new Executor({
  group: "billing",
  url: "http://127.0.0.1:9000",
  capacity: 4,
  replyWithin: 0,
});

// Params typed by the parser: shape() or any (raw: unknown) => P.
executor.handle("/reconcile", { params: shape({ region: "string", limit: "number?" }) }, async (run) => {
  const region: string = run.params.region;
  const limit: number | undefined = run.params.limit;
  // @ts-expect-error: no such field
  run.params.other;
  run.log(`reconciling ${region}`, limit);
  run.progress(50);
  return `reconciled ${region}`;
});

interface Export {
  day: string;
}
const parseExport = (raw: unknown): Export => {
  if (typeof raw !== "object" || raw === null || typeof (raw as Export).day !== "string")
    throw new Error("day");
  return raw as Export;
};
executor.handle("/export", { params: parseExport, replyWithin: 10_000 }, async (run: Run<Export>) => {
  if (run.stopping || run.signal.aborted) throw new Failed("STOPPED", "try again", { stopRetry: false });
  const shard: number = run.shardIndex + run.shardTotal + run.attempt + run.taskId;
  const when: Date = run.scheduledAt;
  return { code: 0, message: `${run.params.day} ${shard} ${when.toISOString()}`, output: "..." };
});

// Without a parser params are unknown.
executor.handle("/raw", (run) => {
  // @ts-expect-error: unknown until parsed
  run.params.region;
  return new Failed("NOPE", "no", { stopRetry: true });
});

// @ts-expect-error: a handler returns a message, a result's fields or nothing
executor.handle("/wrong", () => 42);

// A store of your own.
class TableStore implements DedupeStore {
  async claim(requestId: string): Promise<Claim> {
    return requestId ? { state: "new" } : { state: "done", result: { status: "SUCCESS" } };
  }
  async finish(_requestId: string, _result: Result): Promise<void> {}
  async release(_requestId: string): Promise<void> {}
}
new Executor({ dedupe: new TableStore() });
new Executor({ dedupe: new MemoryDedupeStore({ ttl: 3_600_000, maxEntries: 10 }) });
new Executor({ dedupe: false });

await executor.start();
const port: number | undefined = executor.port;
await executor.stop();
void port;
