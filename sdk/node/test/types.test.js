// The hand-written index.d.ts against the example and test-support/types.ts, with tsc when it
// is installed (`npm install` in sdk/node: a dev dependency); skipped without it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { it } from "node:test";
import { SDK_DIR } from "../test-support/ax.js";

const tsc = path.join(SDK_DIR, "node_modules/.bin/tsc");

it(
  "type-checks index.d.ts, the example and typed usage",
  { skip: !existsSync(tsc) && "no tsc: npm install in sdk/node" },
  () => {
    const result = spawnSync(tsc, ["-p", path.join(SDK_DIR, "tsconfig.json")], { encoding: "utf8" });
    assert.equal(result.status, 0, result.stdout + result.stderr);
  },
);
