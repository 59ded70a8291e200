// The origin-form rule belongs to the shared config model (@clawgate/proto); the prober imports
// it from here, so it is re-exported rather than each caller learning the new home at once.
export {
  isRequestPath,
  MAX_REQUEST_PATH_LENGTH,
  type RequestPathRules,
  requestPathProblem,
} from "@clawgate/proto";
