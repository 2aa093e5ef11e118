// The pure parts: signatures, the dedupe store, back-off, results, the params parser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { backoffDelay, Executor, Failed, MemoryDedupeStore, shape, sign, verify } from "../index.js";
import { fromError, fromReturn } from "../src/result.js";

describe("signature", () => {
  it("follows the documented scheme (ax's own test vector)", () => {
    // `printf '1700000000.{}' | openssl dgst -sha256 -hmac secret`, as in ax-core's tests.
    assert.equal(
      sign("secret", 1_700_000_000, "{}"),
      "v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163",
    );
  });

  const body = Buffer.from('{"requestId":"r1"}');
  const now = 1_700_000_000;
  const good = { timestamp: String(now), signature: sign("s3cret", now, body), body, now };

  it("takes a genuine, fresh dispatch", () => {
    assert.equal(verify("s3cret", good), null);
    assert.equal(verify("s3cret", { ...good, now: now + 300 }), null);
    assert.equal(verify("s3cret", { ...good, now: now - 300 }), null);
  });

  it("refuses another secret, another body, missing headers", () => {
    assert.match(verify("other", good), /does not match/);
    assert.match(verify("s3cret", { ...good, body: Buffer.from('{"requestId":"r2"}') }), /does not match/);
    assert.match(verify("s3cret", { ...good, signature: good.signature.slice(0, -1) }), /does not match/);
    assert.match(verify("s3cret", { ...good, signature: undefined }), /missing/);
    assert.match(verify("s3cret", { ...good, timestamp: undefined }), /missing/);
    assert.match(verify("s3cret", { ...good, timestamp: "1e9" }), /Unix seconds/);
  });

  it("refuses a stale one or one from the future (±300 s)", () => {
    assert.match(verify("s3cret", { ...good, now: now + 301 }), /300 s/);
    assert.match(verify("s3cret", { ...good, now: now - 301 }), /300 s/);
  });
});

describe("MemoryDedupeStore", () => {
  const ok = { status: "SUCCESS", message: "done" };

  it("claims once, then says running, then done with the result", () => {
    const store = new MemoryDedupeStore();
    assert.deepEqual(store.claim("a"), { state: "new" });
    assert.deepEqual(store.claim("a"), { state: "running" });
    store.finish("a", ok);
    assert.deepEqual(store.claim("a"), { state: "done", result: ok });
  });

  it("forgets a released run, so it is new again", () => {
    const store = new MemoryDedupeStore();
    store.claim("a");
    store.release("a");
    assert.deepEqual(store.claim("a"), { state: "new" });
  });

  it("drops results past their ttl, never a running claim", () => {
    let now = 0;
    const store = new MemoryDedupeStore({ ttl: 1000, now: () => now });
    store.claim("running");
    store.claim("a");
    store.finish("a", ok);
    now = 999;
    assert.equal(store.claim("a").state, "done");
    now = 1001;
    assert.equal(store.claim("a").state, "new");
    assert.equal(store.claim("running").state, "running");
  });

  it("keeps at most maxEntries, dropping the oldest finished first", () => {
    const store = new MemoryDedupeStore({ maxEntries: 3 });
    store.claim("running"); // claimed first, still running: kept
    for (const id of ["a", "b", "c"]) {
      store.claim(id);
      store.finish(id, ok);
    }
    assert.equal(store.size, 3);
    assert.equal(store.claim("running").state, "running");
    assert.equal(store.claim("b").state, "done");
    assert.equal(store.claim("c").state, "done");
    assert.equal(store.claim("a").state, "new"); // the oldest finished went
  });
});

describe("backoffDelay", () => {
  it("starts at 0.5 s, doubles, stops at 30 s", () => {
    const top = (n) => backoffDelay(n, { random: () => 1 });
    assert.deepEqual(
      [0, 1, 2, 3, 6, 7, 20, 1000].map(top),
      [500, 1000, 2000, 4000, 30000, 30000, 30000, 30000],
    );
  });

  it("draws each wait between half and all of it", () => {
    assert.equal(backoffDelay(2, { random: () => 0 }), 1000);
    for (let i = 0; i < 100; i++) {
      const wait = backoffDelay(3);
      assert.ok(wait >= 2000 && wait <= 4000, `${wait}`);
    }
  });

  it("adds up to the 10 minutes a callback is retried in about 25 tries", () => {
    let total = 0;
    let n = 0;
    while (total < 600_000) total += backoffDelay(n++, { random: () => 1 });
    assert.ok(n > 20 && n < 30, `${n}`);
  });
});

describe("results", () => {
  it("turns returns into successes", () => {
    assert.deepEqual(fromReturn(undefined), { status: "SUCCESS" });
    assert.deepEqual(fromReturn("42 rows"), { status: "SUCCESS", message: "42 rows" });
    assert.deepEqual(fromReturn({ code: 0, message: "ok", output: "log" }), {
      status: "SUCCESS",
      code: 0,
      message: "ok",
      output: "log",
    });
  });

  it("turns Failed and errors into failures, cut to what ax takes", () => {
    assert.deepEqual(fromError(new Failed("UPSTREAM_DOWN", "billing API 503", { stopRetry: true })), {
      status: "FAILED",
      code: "UPSTREAM_DOWN",
      message: "billing API 503",
      stopRetry: true,
    });
    assert.deepEqual(fromReturn(new Failed("NOPE", "no")), { status: "FAILED", code: "NOPE", message: "no" });
    const long = fromError(new Error("x".repeat(5000)));
    assert.equal(long.code, "ERROR");
    assert.equal(long.message.length, 1024);
    assert.deepEqual(fromError("plain"), { status: "FAILED", code: "ERROR", message: "plain" });
    assert.equal(fromError(new Failed("C\u0007".repeat(40))).code, "C".repeat(40));
    // Cut by characters, never inside a surrogate pair (ax could not read the JSON).
    assert.equal(fromReturn("😀".repeat(2000)).message, "😀".repeat(1024));
    assert.equal(Buffer.byteLength(fromReturn({ output: "é".repeat(40_000) }).output), 65_536);
  });
});

describe("shape", () => {
  const parse = shape({ region: "string", limit: "number?", tags: "array?" });

  it("takes what fits", () => {
    assert.deepEqual(parse({ region: "eu", extra: true }), { region: "eu", extra: true });
    assert.deepEqual(parse({ region: "eu", limit: 3, tags: [] }), { region: "eu", limit: 3, tags: [] });
  });

  it("says what does not", () => {
    assert.throws(() => parse({ region: 5 }), /region must be a string, not number/);
    assert.throws(() => parse({}), /region is missing/);
    assert.throws(() => parse({ region: "eu", tags: {} }), /tags must be an array, not object/);
    assert.throws(() => parse([]), /params must be an object, not array/);
  });
});

describe("Executor", () => {
  it("refuses to start without a secret", () => {
    const saved = process.env.AX_SIGNING_SECRET;
    delete process.env.AX_SIGNING_SECRET;
    try {
      assert.throws(() => new Executor(), /AX_SIGNING_SECRET/);
    } finally {
      if (saved !== undefined) process.env.AX_SIGNING_SECRET = saved;
    }
  });

  it("wants the url it is reached on with a group", () => {
    assert.throws(() => new Executor({ secret: "s", group: "billing" }), /url/);
  });
});

describe("README", () => {
  it("starts with the example the tests run, as it is", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const first = readme.match(/```js\n([\s\S]*?)```/)[1];
    assert.equal(first, readFileSync(new URL("../examples/reconcile.js", import.meta.url), "utf8"));
  });
});
