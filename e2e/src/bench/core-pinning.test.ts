import { describe, expect, it } from "vitest";
import { allowedCpus, corePinning } from "./core-pinning.js";

describe("allowedCpus", () => {
  it("reads ranges and single CPUs from Cpus_allowed_list", () => {
    const status = "Name:\tnode\nCpus_allowed:\t13\nCpus_allowed_list:\t0-1,4\nMems_allowed:\t1\n";
    expect(allowedCpus(status)).toEqual([0, 1, 4]);
  });

  it("names the line it could not find", () => {
    expect(() => allowedCpus("Name:\tnode\n")).toThrow(/Cpus_allowed_list/);
  });
});

describe("corePinning", () => {
  it("pins nothing when told off", () => {
    expect(corePinning("off", 1)).toMatchObject({ load: undefined, proxy: undefined });
  });

  it("pins nothing under auto when the data plane runs more than one worker, and says why", () => {
    const pinning = corePinning(undefined, 2);
    expect(pinning.proxy).toBeUndefined();
    expect(pinning.describe).toContain("2 data-plane workers");
  });

  it("refuses a forced pin it cannot make", () => {
    expect(() => corePinning("on", 2)).toThrow(/cannot pin: 2 data-plane workers/);
  });

  it("rejects a setting it does not know", () => {
    expect(() => corePinning("yes", 1)).toThrow(/BENCH_PIN must be auto, on or off, got yes/);
  });
});
