/**
 * How many keys etcd holds under `prefix`, asked over etcd's own JSON gateway (`/v3/kv/range`),
 * so a test can see what a control plane left in the store without linking its store code.
 */
export async function countEtcdKeys(endpoint: string, prefix: string): Promise<number> {
  const key = Buffer.from(prefix);
  // The end of a prefix range: the prefix with its last byte raised by one (keys are ASCII here).
  const end = Buffer.from(key);
  end[end.length - 1] = end[end.length - 1]! + 1;
  const response = await fetch(`${endpoint}/v3/kv/range`, {
    method: "POST",
    body: JSON.stringify({
      key: key.toString("base64"),
      range_end: end.toString("base64"),
      count_only: true,
    }),
  });
  if (!response.ok) {
    throw new Error(`etcd at ${endpoint} answered ${response.status} to a range of ${prefix}`);
  }
  // etcd leaves out a zero count: protobuf's JSON omits default values.
  const body = (await response.json()) as { count?: string };
  return Number(body.count ?? 0);
}

/**
 * Puts one key over etcd's JSON gateway (`/v3/kv/put`), as another writer sharing the store
 * would, and resolves with the revision the put made.
 */
export async function putEtcdKey(endpoint: string, key: string, value: string): Promise<number> {
  const response = await fetch(`${endpoint}/v3/kv/put`, {
    method: "POST",
    body: JSON.stringify({
      key: Buffer.from(key).toString("base64"),
      value: Buffer.from(value).toString("base64"),
    }),
  });
  if (!response.ok) {
    throw new Error(`etcd at ${endpoint} answered ${response.status} to a put of ${key}`);
  }
  const body = (await response.json()) as { header?: { revision?: string } };
  return Number(body.header?.revision ?? 0);
}
