import { isIP } from "node:net";
import { checkServerIdentity, connect, createSecureContext, type SecureContext } from "node:tls";
import { parseHostPort } from "@clawgate/runtime";
import { CallCredentials, ChannelCredentials, type experimental } from "@grpc/grpc-js";

export interface IpAwareTlsOptions {
  /** CA bundle the control plane's certificate must chain to (the system's roots are not used). */
  ca: Buffer;
  /** Client certificate chain and key, for mutual TLS. */
  certChain?: Buffer | undefined;
  privateKey?: Buffer | undefined;
  /** Name checked in the control plane's certificate instead of the dialled host. */
  serverName?: string | undefined;
}

/**
 * TLS credentials for the snapshot channel that send SNI only for a DNS name. grpc-js always
 * hands tls.connect the dialled host as `servername`, and for an IP literal Node then prints
 * DEP0123 ("Setting the TLS ServerName to an IP address is not permitted by RFC 6066") into a
 * log that should hold JSON only. RFC 6066 forbids an IP in SNI, so this omits it there and still
 * checks the certificate against the IP (its IP SAN), or against `serverName` when one is set.
 */
export class IpAwareTlsCredentials extends ChannelCredentials {
  readonly #context: SecureContext;
  readonly #serverName: string | undefined;

  constructor(options: IpAwareTlsOptions) {
    super();
    this.#context = createSecureContext({
      ca: options.ca,
      cert: options.certChain,
      key: options.privateKey,
    });
    this.#serverName = options.serverName;
  }

  _isSecure(): boolean {
    return true;
  }

  _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(
    channelTarget: experimental.GrpcUri,
    _options: unknown,
    callCredentials?: CallCredentials,
  ): experimental.SecureConnector {
    const expected = this.#serverName ?? hostOf(channelTarget.path);
    const context = this.#context;
    const calls = callCredentials ?? CallCredentials.createEmpty();
    return {
      connect(socket) {
        return new Promise((resolve, reject) => {
          const tlsSocket = connect(
            {
              socket,
              host: expected,
              secureContext: context,
              ALPNProtocols: ["h2"],
              // SNI carries DNS names only (RFC 6066 section 3).
              ...(isIP(expected) === 0 ? { servername: expected } : {}),
              // Node would check the name it connected with; the expected one is what matters.
              checkServerIdentity: (_host, cert) => checkServerIdentity(expected, cert),
            },
            () => {
              if (!tlsSocket.authorized) {
                reject(tlsSocket.authorizationError);
                return;
              }
              resolve({ socket: tlsSocket, secure: true });
            },
          );
          tlsSocket.on("error", reject);
        });
      },
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => calls,
      destroy: () => undefined,
    };
  }
}

/** The host of the `host:port` a channel dials (grpc-js puts it in the target's path). */
function hostOf(target: string): string {
  const parsed = parseHostPort(target, { allowPortZero: false });
  return parsed.ok ? parsed.value.host : target;
}
