export { type EtcdProcess, type StartEtcdOptions, startEtcd } from "./etcd-process.js";
