#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so `npx svc …` works without a build step.
import { register } from 'tsx/esm/api';
register();
const { runCli } = await import('../src/main/cli.ts');
const code = await runCli(process.argv.slice(2));
if (code >= 0) process.exitCode = code;
