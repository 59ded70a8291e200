import type { IncomingHttpHeaders } from "node:http";
import { Agent, request } from "undici";
import type { NamedUpstreamReply } from "./named-upstream.js";
import type { Teardown } from "./teardown.js";

export interface FreshAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * A client that opens a new connection for every request. A data plane with workers hands
 * each connection it accepts to one worker in turn (node:cluster), so a run of these requests
 * reaches every worker, where one kept-alive connection would stay on the first.
 */
export class FreshConnections {
  private readonly agent = new Agent({ pipelining: 0 });

  /**
   * `timeoutMs` bounds the wait for headers and for the body of each request (default 10 s);
   * the agent is closed by `teardown`.
   */
  constructor(
    teardown: Teardown,
    private readonly timeoutMs = 10_000,
  ) {
    teardown.add("fresh-connection agent", () => this.agent.close());
  }

  /** One request with these extra headers, body read; transport failures throw. */
  async send(url: string, headers: Record<string, string> = {}): Promise<FreshAnswer> {
    const response = await request(url, {
      dispatcher: this.agent,
      reset: true,
      headers,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text };
  }

  /** The status, or the error's code (its message without one) when no answer came. */
  async status(url: string): Promise<number | string> {
    try {
      return (await this.send(url)).status;
    } catch (error) {
      return errorCode(error);
    }
  }

  /**
   * The name of the named upstream that answered; otherwise the status as a string, or the
   * error's code when no answer came.
   */
  async answeredBy(url: string): Promise<string> {
    try {
      const { status, text } = await this.send(url);
      return status === 200 ? (JSON.parse(text) as NamedUpstreamReply).upstream : String(status);
    } catch (error) {
      return errorCode(error);
    }
  }
}

function errorCode(error: unknown): string {
  return (error as Error & { code?: string }).code ?? (error as Error).message;
}
