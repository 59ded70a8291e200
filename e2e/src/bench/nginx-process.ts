import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { httpStatus } from "../support/http-probe.js";
import { httpsGet } from "../support/https-get.js";
import { ManagedProcess } from "../support/managed-process.js";
import { waitFor } from "../support/wait-for.js";

/** nginx binary; default /usr/sbin/nginx (Debian's package). */
const NGINX_BIN = process.env.NGINX_BIN ?? "/usr/sbin/nginx";

export interface NginxOptions {
  /** Names the config, pid and log files in `dir`. */
  name: string;
  /** Holds everything this nginx writes; it never touches /var or /etc. */
  dir: string;
  port: number;
  /** The server block's body (locations). */
  serverBody: string;
  /** Extra http-level directives, e.g. an upstream block. */
  httpExtra?: string;
  /** HTTPS with HTTP/2 (ALPN h2) on `port` instead of plaintext; the CA checks readiness. */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

/** Starts nginx in the foreground with a config of its own and waits until `/` answers 200. */
export async function startNginx(options: NginxOptions): Promise<ManagedProcess> {
  const { name, dir, port } = options;
  const temp = join(dir, `${name}-temp`);
  await mkdir(temp, { recursive: true });
  const conf = join(dir, `${name}.conf`);
  await writeFile(
    conf,
    `daemon off;
master_process on;
worker_processes 1;
pid ${join(dir, `${name}.pid`)};
error_log ${join(dir, `${name}-error.log`)} warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path ${temp}/client;
  proxy_temp_path ${temp}/proxy;
  fastcgi_temp_path ${temp}/fastcgi;
  uwsgi_temp_path ${temp}/uwsgi;
  scgi_temp_path ${temp}/scgi;
${options.httpExtra ?? ""}
  server {
${listen(port, options.tls)}
${options.serverBody}
  }
}
`,
  );
  // -e: the startup error log, which nginx opens before it reads the config.
  const nginx = await ManagedProcess.spawn({
    name,
    command: NGINX_BIN,
    args: ["-e", join(dir, `${name}-error.log`), "-c", conf, "-p", `${dir}/`],
  });
  try {
    await waitFor(
      async () => {
        nginx.assertRunning();
        if (options.tls === undefined) {
          return (await httpStatus(`http://127.0.0.1:${port}/`)) === 200;
        }
        const ca = await readFile(options.tls.caFile, "utf8");
        return (await httpsGet(port, "/", ca, "localhost").catch(() => undefined))?.status === 200;
      },
      { what: `${name} on 127.0.0.1:${port}` },
    );
  } catch (error) {
    await nginx.stop();
    throw error;
  }
  return nginx;
}

/** The listen directive: plaintext, or TLS with HTTP/2 (nginx 1.22's form, as Debian 12 ships). */
function listen(port: number, tls: NginxOptions["tls"]): string {
  if (tls === undefined) return `    listen 127.0.0.1:${port};`;
  return `    listen 127.0.0.1:${port} ssl http2;
    ssl_certificate ${tls.certFile};
    ssl_certificate_key ${tls.keyFile};
    ssl_protocols TLSv1.2 TLSv1.3;
    http2_max_concurrent_streams 128;`;
}

/** A body of exactly `bytes` bytes of JSON, safe inside an nginx single-quoted string. */
export function fixedJsonBody(bytes: number): string {
  const frame = '{"upstream":"bench","pad":""}';
  return `{"upstream":"bench","pad":"${"x".repeat(Math.max(0, bytes - frame.length))}"}`;
}
