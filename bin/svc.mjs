#!/usr/bin/env node
// `npx svc`, `npm start`: runs the CLI from its build in dist/ (`npm run build`, which `npm ci` runs) with plain
// Node while that is a build of the source beside it, else the TypeScript source through tsx, so that the CLI works
// without a build step and an edited source is never shadowed by an older build. The build is what a production
// process runs: `svc serve` is up in about 0.7 of the time it takes under tsx, `svc --help` in about half (README,
// "Running from the build").
import { fileURLToPath, pathToFileURL } from 'node:url';
import { currentBuild } from './build-state.mjs';

// (Not import.meta.dirname: Node 20 before 20.11 has none.)
const built = currentBuild(fileURLToPath(new URL('..', import.meta.url)));
let cli;
if (built) {
  cli = await import(pathToFileURL(built).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import('../src/main/cli.ts');
}
await cli.runAsCommand(process.argv.slice(2));
