export { type EtcdProcess, type StartEtcdOptions, startEtcd } from "./etcd-process.js";
export { makeTestPki, type TestPki } from "./test-pki.js";
