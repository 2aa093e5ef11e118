// End to end against a real ax, with executors in this process: a run done once however often
// it is delivered (1), forged and stale dispatches refused (2), a 202 then a callback (3), log
// lines and progress (4), params that do not fit (9).
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, it } from "node:test";
import { Executor, MemoryDedupeStore, shape } from "../index.js";
import { cleanup, quiet, SECRET, signedPost, startAx, waitFor } from "../test-support/ax.js";

/** A promise with its resolve at hand: a handler waits on it until the test lets it go. */
function gate() {
  let open;
  const promise = new Promise((resolve) => (open = resolve));
  return Object.assign(promise, { open });
}

describe("dispatches through a real ax", () => {
  let ax;
  let executor;
  let base;
  const calls = {}; // path → requestIds the handler was called with
  const seen = (path, run) => (calls[path] ??= []).push(run.requestId);
  const slowGate = gate();
  let onceAttemptAtEnd;

  before(async () => {
    ax = await startAx();
    const options = {
      secret: SECRET,
      axUrl: ax.url,
      port: 0,
      host: "127.0.0.1",
      logger: quiet,
      drainDelay: 0,
    };
    executor = new Executor({ ...options, shutdownGrace: 1000 });
    executor
      .handle("/once", async (run) => {
        seen("/once", run);
        // Works until the re-delivery reached this executor (it raises run.attempt).
        while (run.attempt < 2) await new Promise((resolve) => setTimeout(resolve, 20));
        onceAttemptAtEnd = run.attempt;
        return `done once (${run.params.n})`;
      })
      .handle("/forged", (run) => seen("/forged", run))
      .handle("/slow", { replyWithin: 200 }, async (run) => {
        seen("/slow", run);
        await slowGate;
        return "slow done";
      })
      .handle("/logs", async (run) => {
        for (let i = 0; i < 150; i++) run.log(`line ${i}`);
        run.log("two\nlines");
        run.progress(50);
        return "logged";
      })
      .handle("/typed", { params: shape({ region: "string" }) }, (run) => {
        seen("/typed", run);
        return `reconciled ${run.params.region}`;
      });
    await executor.start();
    base = `http://127.0.0.1:${executor.port}`;
  });

  after(async () => {
    await executor?.stop();
    await cleanup();
  });

  it("1. runs a dispatch delivered twice once", async () => {
    // timeoutMs 1000: ax gives up on attempt 1 while the handler works and delivers attempt 2
    // (the same requestId), which gets a 202; the result is called back for attempt 2.
    const task = await ax.createTask({
      handlerUrl: `${base}/once`,
      timeoutMs: 1000,
      maxRetry: 3,
      params: { n: 7 },
    });
    const { requestId } = await ax.trigger(task.id);
    const run = await ax.finished(requestId);
    assert.equal(run.status, "SUCCESS", JSON.stringify(run));
    assert.equal(run.message, "done once (7)");
    assert.ok(run.attempt >= 2, `attempt ${run.attempt}`);
    assert.ok(onceAttemptAtEnd >= 2, "the run saw the newest attempt");
    assert.deepEqual(calls["/once"], [requestId]);

    // The same dispatch once more, directly: the kept result, the handler not called again.
    const again = await signedPost(`${base}/once`, {
      taskId: task.id,
      requestId,
      params: { n: 7 },
      scheduledAt: run.scheduledAt,
      attempt: run.attempt + 1,
      callbackToken: "unused",
    });
    assert.equal(again.status, 200);
    assert.equal(again.headers.get("x-ax-duplicate"), "true");
    assert.equal(again.headers.get("x-ax-idempotent"), "true");
    assert.equal(again.headers.get("x-ax-protocol"), "1");
    assert.deepEqual(again.body, { status: "SUCCESS", message: "done once (7)" });
    assert.deepEqual(calls["/once"], [requestId]);
  });

  it("2. refuses forged and stale dispatches", async () => {
    const body = {
      taskId: 1,
      requestId: "forged-1",
      params: {},
      scheduledAt: new Date().toISOString(),
      attempt: 1,
      callbackToken: "t",
    };
    const forged = await signedPost(`${base}/forged`, body, { secret: "not-the-secret-at-all" });
    assert.equal(forged.status, 401);
    assert.match(forged.body.error, /signature/);
    const stale = await signedPost(`${base}/forged`, body, {
      timestamp: Math.floor(Date.now() / 1000) - 600,
    });
    assert.equal(stale.status, 401);
    assert.match(stale.body.error, /timestamp/);
    const unsigned = await fetch(`${base}/forged`, { method: "POST", body: JSON.stringify(body) });
    assert.equal(unsigned.status, 401);
    assert.equal(calls["/forged"], undefined);

    // Through ax: an executor with another secret refuses ax's dispatch, the run fails HTTP_401.
    const other = new Executor({
      secret: "another-secret-0123456789",
      port: 0,
      host: "127.0.0.1",
      logger: quiet,
      drainDelay: 0,
    });
    let called = false;
    other.handle("/run", () => void (called = true));
    await other.start();
    try {
      const task = await ax.createTask({ handlerUrl: `http://127.0.0.1:${other.port}/run` });
      const run = await ax.finished((await ax.trigger(task.id)).requestId);
      assert.equal(run.status, "FAILED");
      assert.equal(run.code, "HTTP_401");
      assert.equal(called, false);
    } finally {
      await other.stop();
    }
    // The signed dispatch of a path nobody serves, or a GET, is no run either; nor is a signed
    // body that is no JSON, or one over 1 MiB.
    assert.equal((await signedPost(`${base}/nowhere`, body)).status, 404);
    assert.equal((await fetch(`${base}/forged`)).status, 405);
    assert.equal((await signedPost(`${base}/forged`, "{not json")).status, 400);
    const huge = JSON.stringify({ ...body, params: { blob: "x".repeat(1024 * 1024) } });
    assert.equal((await signedPost(`${base}/forged`, huge)).status, 413);
    assert.equal(calls["/forged"], undefined);
  });

  it("3. answers 202 past replyWithin and calls the result back", async () => {
    // The mechanics, against a callback receiver of the test's own.
    const received = [];
    const receiver = http.createServer((req, res) => {
      let text = "";
      req.on("data", (d) => (text += d));
      req.on("end", () => {
        received.push(JSON.parse(text));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const direct = gate();
    const probe = new Executor({
      secret: SECRET,
      axUrl: "http://127.0.0.1:9",
      port: 0,
      host: "127.0.0.1",
      logger: quiet,
      replyWithin: 100,
      drainDelay: 0,
    });
    probe.handle("/slow", async () => {
      await direct;
      return "late";
    });
    await probe.start();
    try {
      const reply = await signedPost(`http://127.0.0.1:${probe.port}/slow`, {
        taskId: 1,
        requestId: "direct-1",
        params: {},
        scheduledAt: new Date().toISOString(),
        attempt: 3,
        callbackToken: "tok-1",
        callbackUrl: `http://127.0.0.1:${receiver.address().port}/cb`,
      });
      assert.equal(reply.status, 202);
      assert.equal(received.length, 0);
      direct.open();
      await waitFor("the callback", () => received.length === 1);
      assert.deepEqual(received[0], {
        requestId: "direct-1",
        callbackToken: "tok-1",
        attempt: 3,
        status: "SUCCESS",
        message: "late",
      });
    } finally {
      await probe.stop();
      receiver.close();
    }

    // Through ax: the run waits RUNNING while the handler works, then ends with its message.
    const task = await ax.createTask({ handlerUrl: `${base}/slow`, timeoutMs: 30_000 });
    const { requestId } = await ax.trigger(task.id);
    await waitFor("the slow handler called", () => calls["/slow"]?.includes(requestId));
    // RUNNING: ax took the 202 and waits for the callback.
    await waitFor("the run RUNNING", async () => (await ax.run(requestId)).status === "RUNNING");
    slowGate.open();
    const run = await ax.finished(requestId);
    assert.equal(run.status, "SUCCESS");
    assert.equal(run.message, "slow done");
  });

  it("7. a reply still waiting past the shutdown grace answers 503 EXECUTOR_SHUTDOWN", async () => {
    const store = new MemoryDedupeStore();
    const stopping = new Executor({
      secret: SECRET,
      port: 0,
      host: "127.0.0.1",
      logger: quiet,
      drainDelay: 0,
      shutdownGrace: 200,
      replyWithin: 60_000,
      dedupe: store,
    });
    let sawStopping = false;
    stopping.handle("/hang", async (run) => {
      await new Promise((resolve) => run.signal.addEventListener("abort", resolve));
      sawStopping = run.stopping;
    });
    await stopping.start();
    const url = `http://127.0.0.1:${stopping.port}/hang`;
    const reply = signedPost(url, {
      taskId: 1,
      requestId: "hang-1",
      params: {},
      scheduledAt: new Date().toISOString(),
      attempt: 1,
      callbackToken: "t",
    });
    await waitFor("the run claimed", () => store.size === 1);
    await stopping.stop();
    const { status, body } = await reply;
    assert.equal(status, 503);
    assert.deepEqual(body, {
      status: "FAILED",
      code: "EXECUTOR_SHUTDOWN",
      message: "the executor shut down before the run ended",
    });
    assert.equal(sawStopping, true);
    assert.deepEqual(store.claim("hang-1"), { state: "new" }, "released, so a re-delivery runs it again");
    await assert.rejects(fetch(url, { method: "POST" }), "the listener is closed");
  });

  it("4. shows log lines and progress on the run", async () => {
    const task = await ax.createTask({ handlerUrl: `${base}/logs` });
    const { requestId } = await ax.trigger(task.id);
    const run = await ax.finished(requestId);
    assert.equal(run.status, "SUCCESS");
    // Flushed before the result, so all there as the run ends.
    const log = await ax.log(requestId);
    const [attempt] = log.attempts;
    assert.equal(attempt.progress, 50);
    const lines = attempt.lines.map((line) => line.text);
    assert.deepEqual(lines, [...Array.from({ length: 150 }, (_, i) => `line ${i}`), "two", "lines"]);
  });

  it("9. fails params of the wrong shape with BAD_PARAMS, not retried", async () => {
    const task = await ax.createTask({ handlerUrl: `${base}/typed`, params: { region: 5 }, maxRetry: 3 });
    const run = await ax.finished((await ax.trigger(task.id)).requestId);
    assert.equal(run.status, "FAILED");
    assert.equal(run.code, "BAD_PARAMS");
    assert.match(run.message, /region must be a string/);
    assert.equal(run.attempt, 1);
    assert.equal(run.retryCount, 0);
    assert.equal(calls["/typed"], undefined);

    const good = await ax.createTask({ handlerUrl: `${base}/typed`, params: { region: "eu" } });
    const ok = await ax.finished((await ax.trigger(good.id)).requestId);
    assert.equal(ok.status, "SUCCESS");
    assert.equal(ok.message, "reconciled eu");
  });
});
