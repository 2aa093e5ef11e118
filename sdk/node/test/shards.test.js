// End to end against a real ax: a BROADCAST task over a group of two executors (8) gives each
// its own shard of every fire.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Executor } from "../index.js";
import { cleanup, freePort, quiet, SECRET, startAx, waitFor } from "../test-support/ax.js";

describe("shards", () => {
  let ax;
  const executors = [];
  const shards = []; // {member, requestId, scheduledAt, shardIndex, shardTotal}

  before(async () => {
    ax = await startAx();
    for (const member of ["a", "b"]) {
      const port = await freePort();
      const executor = new Executor({
        secret: SECRET,
        axUrl: ax.url,
        group: "billing",
        url: `http://127.0.0.1:${port}`,
        logger: quiet,
        drainDelay: 0,
      });
      executor.handle("/shard", (run) => {
        const { requestId, scheduledAt, shardIndex, shardTotal } = run;
        shards.push({ member, requestId, scheduledAt: scheduledAt.toISOString(), shardIndex, shardTotal });
        return `shard ${shardIndex} of ${shardTotal}`;
      });
      await executor.start();
      executors.push(executor);
    }
  });

  after(async () => {
    await Promise.all(executors.map((executor) => executor.stop()));
    await cleanup();
  });

  it("8. a BROADCAST task gives each member its shard index, total 2", async () => {
    await waitFor(
      "two members",
      async () => (await ax.api("GET", "/api/executors/billing")).members.length === 2,
    );
    // A broadcast fires shards on its schedule (a manual run is the whole job on one member).
    const task = await ax.createTask({
      cron: "* * * * * *",
      executor: { group: "billing", path: "/shard", routing: "BROADCAST" },
    });
    const fire = await waitFor("one fire's two shards", () => {
      const byFire = new Map();
      for (const shard of shards)
        byFire.set(shard.scheduledAt, [...(byFire.get(shard.scheduledAt) ?? []), shard]);
      return [...byFire.values()].find((fired) => fired.length === 2);
    });
    await ax.api("POST", `/api/tasks/${task.id}/pause`);

    fire.sort((x, y) => x.shardIndex - y.shardIndex);
    assert.deepEqual(
      fire.map(({ shardIndex, shardTotal }) => [shardIndex, shardTotal]),
      [
        [0, 2],
        [1, 2],
      ],
    );
    assert.notEqual(fire[0].member, fire[1].member, "each member gets its own shard");
    assert.notEqual(fire[0].requestId, fire[1].requestId);
    for (const shard of fire) {
      const run = await ax.finished(shard.requestId);
      assert.equal(run.status, "SUCCESS");
      assert.equal(run.message, `shard ${shard.shardIndex} of 2`);
      assert.equal(run.shardIndex, shard.shardIndex);
    }
  });
});
