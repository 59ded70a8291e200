import { type Browser, chromium } from "playwright-core";

/** Debian's chromium package; CI installs it (.ci/run). playwright-core downloads no browser. */
export const CHROMIUM_PATH = process.env.CLAWGATE_CHROMIUM ?? "/usr/bin/chromium";

/** A headless Chromium for the console tests and screenshots; close() it when done. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // Containers often run as root, where Chromium's sandbox cannot start.
    chromiumSandbox: false,
    timeout: 30_000,
  });
}
