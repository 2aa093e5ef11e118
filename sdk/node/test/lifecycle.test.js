// End to end against a real ax (with tokens), executors in their own processes: registration,
// heartbeats and removal (5, with the example's run and its log: 4), a kill -9 mid-run retried
// (6), graceful shutdown (7).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  cleanup,
  EXECUTOR_TOKEN,
  freePort,
  SECRET,
  spawnNode,
  startAx,
  stopProcess,
  waitFor,
} from "../test-support/ax.js";

describe("executor processes against a real ax", () => {
  let ax;
  // Heartbeats each second and members dropped after 3 s unheard, so "heartbeats keep it" shows fast.
  before(async () => {
    ax = await startAx({
      tokens: true,
      env: { AX_EXECUTOR_HEARTBEAT_SECS: "1", AX_EXECUTOR_MEMBER_TTL_SECS: "3" },
    });
  });
  after(cleanup);

  const env = (port, more = {}) => ({
    AX_URL: ax.url,
    AX_SIGNING_SECRET: SECRET,
    AX_EXECUTOR_TOKEN: EXECUTOR_TOKEN,
    EXECUTOR_URL: `http://127.0.0.1:${port}`,
    ...more,
  });
  const member = async (port) => {
    const group = await ax.api("GET", "/api/executors/billing");
    return group.members.find((m) => m.url.replace(/\/$/, "") === `http://127.0.0.1:${port}`);
  };

  it("5. registers the example in its group, heartbeats keep it, shutdown removes it", async () => {
    const port = await freePort();
    const example = spawnNode("examples/reconcile.js", env(port));
    const joined = await waitFor(
      "the example registered",
      async () => (await member(port))?.state === "HEALTHY" && member(port),
    );
    assert.equal(joined.registered, true);

    // A run through the group: its result, log line and progress (4, the example's way).
    const task = await ax.createTask({
      executor: { group: "billing", path: "/reconcile" },
      params: { region: "eu" },
    });
    const run = await ax.finished((await ax.trigger(task.id)).requestId);
    assert.equal(run.status, "SUCCESS", JSON.stringify(run));
    assert.equal(run.message, "reconciled eu");
    const [attempt] = (await ax.log(run.requestId)).attempts;
    assert.deepEqual(
      attempt.lines.map((line) => line.text),
      ["reconciling eu"],
    );
    assert.equal(attempt.progress, 50);

    // Past the member TTL (3 s) it is still there, seen again and again.
    const seen = new Set();
    const lapses = [];
    const ttlPassed = Date.parse(joined.registeredAt) + 4_000;
    await waitFor("heartbeats past the member TTL", async () => {
      const now = await member(port);
      if (now?.state !== "HEALTHY") lapses.push(now);
      seen.add(now?.lastSeenAt);
      return Date.now() > ttlPassed && seen.size >= 3;
    });
    assert.deepEqual(lapses, []);

    const exit = await stopProcess(example, "SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null }, example.output);
    const left = await member(port);
    // Removed by the executor itself (not expired: that would say so).
    assert.equal(left?.state, "GONE", JSON.stringify(left));
    assert.match(left.goneReason, /unregistered itself/);
  });

  it("6. a run whose executor is killed (kill -9) mid-run is retried and succeeds", async () => {
    const port = await freePort();
    const first = spawnNode("test-support/fixture.js", env(port, { SLOW_MS: "60000" }));
    await waitFor("the fixture listening", () => fetch(`http://127.0.0.1:${port}/`).then(() => true));
    const task = await ax.createTask({
      handlerUrl: `http://127.0.0.1:${port}/work`,
      timeoutMs: 2000,
      maxRetry: 3,
    });
    const { requestId } = await ax.trigger(task.id);
    await waitFor("the run started", () => first.output.includes(`started ${requestId} 1`));
    await stopProcess(first, "SIGKILL");

    const second = spawnNode("test-support/fixture.js", env(port, { SLOW_MS: "100" }));
    const run = await ax.finished(requestId);
    assert.equal(run.status, "SUCCESS", JSON.stringify(run));
    assert.equal(run.requestId, requestId);
    assert.ok(run.attempt >= 2, `attempt ${run.attempt}`);
    assert.match(second.output, new RegExp(`started ${requestId} [2-9]`));
    await stopProcess(second, "SIGTERM");
  });

  it("7. SIGTERM lets a run in flight finish", async () => {
    const port = await freePort();
    const executor = spawnNode("test-support/fixture.js", env(port, { DRAIN_DELAY: "300" }));
    await waitFor("the fixture listening", () => fetch(`http://127.0.0.1:${port}/`).then(() => true));
    const task = await ax.createTask({ handlerUrl: `http://127.0.0.1:${port}/work`, params: { ms: 1500 } });
    const { requestId } = await ax.trigger(task.id);
    await waitFor("the run started", () => executor.output.includes(`started ${requestId}`));

    const exit = await stopProcess(executor, "SIGTERM", 10_000);
    assert.deepEqual(exit, { code: 0, signal: null }, executor.output);
    assert.match(executor.output, new RegExp(`finished ${requestId} stopping=true`));
    const run = await ax.finished(requestId);
    assert.equal(run.status, "SUCCESS", JSON.stringify(run));
    assert.equal(run.message, "worked 1500 ms");
  });

  it("7. SIGTERM past the grace reports the run EXECUTOR_SHUTDOWN", async () => {
    const port = await freePort();
    const executor = spawnNode("test-support/fixture.js", env(port, { SHUTDOWN_GRACE: "300" }));
    await waitFor("the fixture listening", () => fetch(`http://127.0.0.1:${port}/`).then(() => true));
    const task = await ax.createTask({ handlerUrl: `http://127.0.0.1:${port}/work`, params: { ms: 60_000 } });
    const { requestId } = await ax.trigger(task.id);
    await waitFor("the run started", () => executor.output.includes(`started ${requestId}`));

    const exit = await stopProcess(executor, "SIGTERM", 10_000);
    assert.deepEqual(exit, { code: 0, signal: null }, executor.output);
    const run = await ax.finished(requestId);
    assert.equal(run.status, "FAILED", JSON.stringify(run));
    assert.equal(run.code, "EXECUTOR_SHUTDOWN");
    assert.equal(run.message, "the executor shut down before the run ended");
  });
});
