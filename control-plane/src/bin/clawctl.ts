#!/usr/bin/env node
import { runClawctl } from "../cli/clawctl-program.js";

process.exitCode = await runClawctl(process.argv.slice(2));
