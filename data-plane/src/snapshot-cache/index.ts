export { type DecodeResult, decodeCacheFile, encodeCacheFile } from "./cache-file.js";
export { type CacheErrorKind, CacheMetrics } from "./cache-metrics.js";
export {
  type CacheApplyResult,
  LastGoodSnapshot,
  type LastGoodSnapshotOptions,
} from "./last-good-snapshot.js";
export {
  CACHE_FILE_NAME,
  DELTA_LOG_NAME,
  type LoadResult,
  type SaveResult,
  SnapshotCache,
} from "./snapshot-cache.js";
