// An executor process for the tests that kill or stop one. `/work` works `params.ms` ms (or
// SLOW_MS), printing "started <requestId> <attempt>" as it begins and "finished <requestId>
// stopping=<bool>" as it ends. Settings from the environment: EXECUTOR_URL, EXECUTOR_GROUP,
// REPLY_WITHIN, SHUTDOWN_GRACE, DRAIN_DELAY (ms).
import { Executor } from "../index.js";

const env = process.env;
const executor = new Executor({
  url: env.EXECUTOR_URL,
  group: env.EXECUTOR_GROUP || undefined,
  replyWithin: Number(env.REPLY_WITHIN ?? 0),
  shutdownGrace: Number(env.SHUTDOWN_GRACE ?? 30_000),
  drainDelay: Number(env.DRAIN_DELAY ?? 0),
});

executor.handle("/work", async (run) => {
  console.log(`started ${run.requestId} ${run.attempt}`);
  const ms = Number(env.SLOW_MS ?? run.params.ms ?? 0);
  run.log(`working ${ms} ms`);
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    run.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()));
  });
  run.progress(100);
  console.log(`finished ${run.requestId} stopping=${run.stopping}`);
  return `worked ${ms} ms`;
});

await executor.serve();
