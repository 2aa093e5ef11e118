// The conformance check (10): `ax executor check` plays ax against the running ten-line example
// and must find every check conforming. Fails (not skips) when this ax has no such command.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import {
  AX_BIN,
  cleanup,
  freePort,
  hasExecutorCheck,
  SECRET,
  spawnNode,
  startAx,
  waitFor,
} from "../test-support/ax.js";

/** Runs `ax executor check URL --secret S …args`; resolves to {code, output}. */
function check(url, secret, args = ["--path", "/reconcile", "--params", '{"region":"eu"}']) {
  args = ["executor", "check", url, "--secret", secret, ...args];
  return new Promise((resolve) => {
    const child = spawn(AX_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (data) => (output += data));
    child.stderr.on("data", (data) => (output += data));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe("ax executor check", () => {
  let url; // the example's
  let slowUrl; // an executor answering 202 and calling back

  before(async () => {
    const ax = await startAx();
    url = `http://127.0.0.1:${await freePort()}`;
    slowUrl = `http://127.0.0.1:${await freePort()}`;
    spawnNode("examples/reconcile.js", { AX_URL: ax.url, AX_SIGNING_SECRET: SECRET, EXECUTOR_URL: url });
    spawnNode("test-support/fixture.js", {
      AX_URL: ax.url,
      AX_SIGNING_SECRET: SECRET,
      EXECUTOR_URL: slowUrl,
    });
    await waitFor("the executors listening", async () => (await fetch(url)) && fetch(slowUrl));
  });
  after(cleanup);

  it("10. finds the ten-line example conforming", async () => {
    assert.ok(
      hasExecutorCheck(),
      `${AX_BIN} has no \`executor check\` (\`ax executor check --help\` fails): build an ax that has it`,
    );
    const passed = await check(url, SECRET);
    assert.equal(passed.code, 0, passed.output);
    // The 202-and-callback side, with log lines, on a handler slower than its replyWithin (0).
    const slow = await check(slowUrl, SECRET, [
      "--path",
      "/work",
      "--slow-path",
      "/work",
      "--params",
      '{"ms":300}',
    ]);
    assert.equal(slow.code, 0, slow.output);
    assert.match(slow.output, /callback +ok/);
    // And it can tell: with another secret every dispatch is refused, which does not conform.
    const refused = await check(url, "another-secret-0123456789");
    assert.equal(refused.code, 1, refused.output);
  });
});
