import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

// A full collection before each reading, so the heap measured is what is still referenced.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/**
 * This thread's used heap after two full collections: what is still referenced. A WeakRef's
 * target is kept until the current job ends, so the collection runs in a later turn, as it
 * would between two deltas off the stream.
 */
export async function settledHeap(): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}
