#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so `npx svc …` works without a build step.
import { register } from 'tsx/esm/api';
register();
const { runAsCommand } = await import('../src/main/cli.ts');
await runAsCommand(process.argv.slice(2));
