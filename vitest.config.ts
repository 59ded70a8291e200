import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{control-plane,data-plane,proto,runtime,e2e}/src/**/*.test.ts"],
    // e2e tests spawn real processes (etcd, control plane, data planes); give them room,
    // but every wait inside them is on an event, not a sleep.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // vitest's default is one file at a time below 3 cores (cores - 1), but an e2e file spends
    // most of its time waiting on its processes (etcd, probes, leases), not on a core: two files
    // at once on 2 cores nearly halve the run, and the tests wait on events, not on time.
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
