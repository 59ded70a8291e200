#!/usr/bin/env node
// Remediation command for the e2e tests, standing in for `systemctl restart agent@{port}`:
//   restart-node.mjs <record file> <pid file> <upstream script> <host> <port> <node>
// It appends its remediation arguments as one JSON line to the record file, starts the
// upstream script again on <port> the way `nohup ./agent &` would (in the command's process
// group, holding the command's stderr), appends that PID to the pid file for the test's
// cleanup, and exits 0 once the port accepts connections (1 if it does not within 5 s). The
// control plane must take that exit as the end of the hook (review 20b H4): waiting for the
// stderr the node holds would time the hook out and kill the node with its group.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { connect } from "node:net";

const [recordFile, pidFile, upstreamScript, host, port, node] = process.argv.slice(2);
appendFileSync(recordFile, `${JSON.stringify({ args: [host, port, node], at: Date.now() })}\n`);

const child = spawn(process.execPath, [upstreamScript], {
  stdio: ["ignore", "ignore", "inherit"],
  env: { ...process.env, UPSTREAM_NAME: `restarted-${port}`, UPSTREAM_PORT: port },
});
appendFileSync(pidFile, `${child.pid}\n`);
child.unref();

const deadline = Date.now() + 5_000;
const tryConnect = () => {
  const socket = connect({ host, port: Number(port) });
  socket.once("connect", () => {
    socket.destroy();
    process.exit(0);
  });
  socket.once("error", () => {
    socket.destroy();
    if (Date.now() > deadline) {
      process.stderr.write(`node on ${host}:${port} did not come up within 5 s\n`);
      process.exit(1);
    }
    setTimeout(tryConnect, 25);
  });
};
tryConnect();
