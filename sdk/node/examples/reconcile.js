import { Executor, shape } from "ax-executor";

const url = process.env.EXECUTOR_URL ?? "http://127.0.0.1:9000";
const executor = new Executor({ group: "billing", url });

executor.handle("/reconcile", { params: shape({ region: "string" }) }, async (run) => {
  run.log(`reconciling ${run.params.region}`);
  run.progress(50);
  return `reconciled ${run.params.region}`;
});

await executor.serve();
