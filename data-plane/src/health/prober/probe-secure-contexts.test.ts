import type { SecureContext } from "node:tls";
import { describe, expect, it } from "vitest";
import { ProbeSecureContexts } from "./probe-secure-contexts.js";

// tls.connect given PEM strings parses them on every probe; the probe thread builds one
// context per file set's contents instead.
describe("ProbeSecureContexts", () => {
  it("builds a context once per contents, and again only for new contents", () => {
    const built: string[] = [];
    const contexts = new ProbeSecureContexts((files) => {
      built.push(files.contextKey);
      return { context: files.contextKey } as unknown as SecureContext;
    });
    const bundle = { ca: "bundle", contextKey: "a" };
    for (let probe = 0; probe < 100; probe++) contexts.get(bundle);
    // The same contents reach the thread as a new object with each message from the main one.
    contexts.get({ ...bundle });
    contexts.get({ ca: "renewed", contextKey: "b" });
    expect(built).toEqual(["a", "b"]);
  });
});
