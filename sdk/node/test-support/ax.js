// Test support (outside test/, which node --test would run as tests): a real `ax serve` in a
// temp dir, executor processes, and polling. Every process started here is killed by
// `cleanup()`, and on exit whatever happens.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sign } from "../index.js";

export const SDK_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REPO = path.resolve(SDK_DIR, "../..");
export const AX_BIN = process.env.AX_BIN ?? path.join(REPO, "target/debug/ax");
export const SECRET = "node-sdk-test-secret-0123456789";
export const ADMIN_TOKEN = "node-sdk-admin-token-0123456789";
export const EXECUTOR_TOKEN = "node-sdk-executor-token-0123456789";
export const quiet = { info() {}, warn() {}, error() {} };

const children = new Set();
const dirs = new Set();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Kills every process started here and removes the temp dirs. */
export async function cleanup() {
  await Promise.all([...children].map((child) => stopProcess(child, "SIGKILL")));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

export function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), "ax-node-sdk-"));
  dirs.add(dir);
  return dir;
}

/** A port free on 127.0.0.1 right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Polls `fn` until it returns a truthy value, or fails after `timeout` ms saying `what`. */
export async function waitFor(what, fn, { timeout = 20_000, interval = 50 } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** Starts `node script` with `env`; its output is gathered in `child.output`. */
export function spawnNode(script, env) {
  const child = spawn(process.execPath, [script], {
    cwd: SDK_DIR,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  return child;
}

function track(child) {
  children.add(child);
  child.output = "";
  child.stdout.on("data", (data) => (child.output += data));
  child.stderr.on("data", (data) => (child.output += data));
  child.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  child.exited.then(() => children.delete(child));
}

/** Sends `signal` and waits for the exit; SIGKILL after `timeout` ms. */
export async function stopProcess(child, signal = "SIGTERM", timeout = 5_000) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exited;
  child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), timeout);
  const exit = await child.exited;
  clearTimeout(timer);
  return exit;
}

/**
 * A real `ax serve` on a free port, its store in a temp dir. `tokens`: with the admin and a
 * `billing` executor token (the API then wants the admin's). `env`: more variables.
 */
export async function startAx({ tokens = false, env = {} } = {}) {
  if (!existsSync(AX_BIN)) {
    throw new Error(`no ax binary at ${AX_BIN}: build it (cargo build) or set AX_BIN`);
  }
  const dir = tempDir();
  const port = await freePort();
  const args = ["serve"];
  if (tokens) {
    const config = path.join(dir, "ax.yaml");
    writeFileSync(
      config,
      `server:\n  admin_token: "${ADMIN_TOKEN}"\n  tokens:\n` +
        `    - {name: billing-executor, token: "${EXECUTOR_TOKEN}", role: executor, groups: [billing]}\n`,
    );
    args.push("--config", config);
  }
  const child = spawn(AX_BIN, args, {
    cwd: dir,
    env: {
      ...process.env,
      AX_STORE_URL: `sqlite://${dir}/ax.db`,
      AX_BIND: "127.0.0.1",
      AX_PORT: String(port),
      AX_SIGNING_SECRET: SECRET,
      AX_RETRY_BACKOFF_SECS: "1",
      RUST_LOG: process.env.RUST_LOG ?? "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor("ax's /healthz", async () => {
    if (child.exitCode !== null) throw new Error(`ax exited ${child.exitCode}: ${child.output}`);
    return (await fetch(`${url}/healthz`)).status === 200;
  });
  return new Ax(url, tokens ? ADMIN_TOKEN : undefined, child);
}

/** ax's API, as the tests use it. */
class Ax {
  constructor(url, token, child) {
    this.url = url;
    this.token = token;
    this.child = child;
  }

  async api(method, path, body) {
    const headers = {};
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${this.url}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  /** A task that only fires when triggered (unless `cron` says otherwise). */
  createTask(fields) {
    const name = `t-${Math.random().toString(36).slice(2)}`;
    return this.api("POST", "/api/tasks", { name, cron: "0 0 0 1 1 *", maxRetry: 0, ...fields });
  }

  /** Fires the task now; resolves to its new run. */
  trigger(taskId) {
    return this.api("POST", `/api/tasks/${taskId}/trigger`);
  }

  run(requestId) {
    return this.api("GET", `/api/instances/${requestId}`);
  }

  /** Waits for the run to end (SUCCESS, FAILED, …); resolves to it. */
  finished(requestId, timeout) {
    const open = ["PENDING", "READY", "RUNNING"];
    return waitFor(
      `run ${requestId} to end`,
      async () => {
        const run = await this.run(requestId);
        return open.includes(run.status) ? null : run;
      },
      { timeout },
    );
  }

  log(requestId) {
    return this.api("GET", `/api/instances/${requestId}/log`);
  }
}

/** POSTs `body` to an executor as ax would, signed (`secret`, `timestamp` to forge or age it). */
export async function signedPost(url, body, { secret = SECRET, timestamp, signature } = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const ts = String(timestamp ?? Math.floor(Date.now() / 1000));
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-ax-timestamp": ts,
      "x-ax-signature": signature ?? sign(secret, ts, text),
    },
    body: text,
  });
  const reply = await response.text();
  return { status: response.status, headers: response.headers, body: reply ? JSON.parse(reply) : null };
}

/** Whether this ax binary has `ax executor check`. */
export function hasExecutorCheck() {
  return existsSync(AX_BIN) && spawnSync(AX_BIN, ["executor", "check", "--help"]).status === 0;
}
