export { compactStore, holdNextWatch } from "./compaction.js";
export { type EtcdProcess, type StartEtcdOptions, startEtcd } from "./etcd-process.js";
export { evictedNodes } from "./evicted-nodes.js";
export { type FakeChange, FakeSnapshotPublisher } from "./fake-snapshot-publisher.js";
export { makeTestPki, type TestPki } from "./test-pki.js";
