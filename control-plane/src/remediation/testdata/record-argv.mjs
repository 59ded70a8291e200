#!/usr/bin/env node
// Test fixture: appends its arguments (after the output file) as one JSON line to that file,
// so tests can see exactly what argv a remediation command received.
import { appendFileSync } from "node:fs";

const [out, ...args] = process.argv.slice(2);
appendFileSync(
  out,
  `${JSON.stringify({ args, env: process.env.CLAWGATE_ADMIN_TOKEN ?? null, node: process.env.CLAWGATE_REMEDIATION_NODE ?? null })}\n`,
);
const exit = Number(process.env.RECORD_EXIT ?? "0");
if (exit !== 0) process.stderr.write(`refusing on purpose with ${exit}\n`);
process.exit(exit);
