// The image's HEALTHCHECK: the slim base has no curl, so node's fetch asks /healthz (which needs
// no token) on the admin port of whichever plane this container runs. One image runs either
// plane, so both admin addresses are tried, read from the same variables the planes read;
// healthy (exit 0) when one answers 2xx, unhealthy (exit 1) otherwise. A plane whose admin
// address is set by flag or config file instead needs CLAWGATE_HEALTHCHECK_URL.

const PLANES = [
  { variable: "CLAWGATE_DP_ADMIN_LISTEN", fallback: "127.0.0.1:9901" },
  { variable: "CLAWGATE_ADMIN_LISTEN", fallback: "127.0.0.1:9180" },
];

/** A listen address as something to connect to: a wildcard host means this container's loopback. */
function healthzUrl(listen) {
  const at = listen.lastIndexOf(":");
  let host = listen.slice(0, at);
  const port = listen.slice(at + 1);
  if (host === "" || host === "0.0.0.0") host = "127.0.0.1";
  if (host === "[::]" || host === "::") host = "[::1]";
  return `http://${host}:${port}/healthz`;
}

async function answersOk(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

const urls = process.env.CLAWGATE_HEALTHCHECK_URL
  ? [process.env.CLAWGATE_HEALTHCHECK_URL]
  : PLANES.map((p) => healthzUrl(process.env[p.variable] || p.fallback));
const results = await Promise.all(urls.map(answersOk));
if (results.includes(true)) process.exit(0);
process.stderr.write(`unhealthy: no 2xx from ${urls.join(" or ")}\n`);
process.exit(1);
