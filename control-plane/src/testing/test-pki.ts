// The throwaway PKI moved to @clawgate/runtime/testing, so data-plane tests can use it too.
export { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
