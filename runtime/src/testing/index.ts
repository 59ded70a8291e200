// Helpers for tests of both planes (never imported by the binaries).
export { issueServerCertificate, makeTestPki, type TestPki } from "./test-pki.js";
