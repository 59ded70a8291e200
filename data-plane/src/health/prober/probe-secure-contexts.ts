import type { SecureContext } from "node:tls";
import type { ProbeTlsFiles } from "./probe-protocol.js";

/**
 * Distinct file sets kept; past it the oldest built goes (a renewed file is a new set, and the
 * old one is not probed with again). Far more than a gateway names: most share one CA.
 */
const MAX_CONTEXTS = 256;

/**
 * The probe thread's SecureContexts, one per file set's contents: the main thread's cannot be
 * sent here, and tls.connect given PEM strings parses them on every probe (30 ms of CPU with a
 * CA bundle; 20,000 nodes probed every 10 s would be 2,000 parses a second).
 */
export class ProbeSecureContexts {
  readonly #contexts = new Map<string, SecureContext>();
  readonly #create: (files: ProbeTlsFiles) => SecureContext;

  constructor(create: (files: ProbeTlsFiles) => SecureContext) {
    this.#create = create;
  }

  get(files: ProbeTlsFiles): SecureContext {
    let context = this.#contexts.get(files.contextKey);
    if (context === undefined) {
      context = this.#create(files);
      if (this.#contexts.size >= MAX_CONTEXTS) {
        const oldest = this.#contexts.keys().next().value;
        if (oldest !== undefined) this.#contexts.delete(oldest);
      }
      this.#contexts.set(files.contextKey, context);
    }
    return context;
  }
}
