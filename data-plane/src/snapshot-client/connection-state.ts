/**
 * Where the snapshot client stands with the control planes. `connected` means a stream is open
 * on a ready channel; the last good snapshot keeps serving in every state.
 */
export type ConnectionState =
  | { status: "idle" }
  | { status: "connecting"; address: string }
  | { status: "connected"; address: string }
  | { status: "waiting"; nextAddress: string; retryInMs: number; reason: string }
  | { status: "stopped" };

export type ConnectionStateListener = (state: ConnectionState) => void;
