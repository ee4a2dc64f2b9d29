// `npm run build` (and `prepare`, which npm runs on `npm ci`, `npm install` and for a git dependency): compiles src/
// into dist/ (tsconfig.build.json): JavaScript for the server and the CLI, which bin/svc.mjs (`npx svc`,
// `npm start`) runs with plain Node while it is a build of the source beside it, and declarations for the SDK,
// which other projects import as `svc-platform/sdk` (package.json `exports`). The migrations are copied beside
// the code that reads them, and the source's digest is recorded (bin/build-state.mjs). Plain JavaScript: it runs
// before anything could compile TypeScript.
//
// The build is made in a directory of its own and then renamed to dist/, so that a process starting meanwhile
// (`npm start` while `npm install` runs prepare) loads a whole build, the old one or the new one, never one
// half deleted (review: ERR_MODULE_NOT_FOUND). It is clean each time: tsc leaves the output of deleted sources
// behind, and an incremental build did not re-create deleted outputs (review).
//
// --if-typescript (prepare): an install with no TypeScript compiler goes on without dist/ (the server then runs its
// source through tsx), and says so. (`npm ci --omit=dev` has one today, as a peer dependency of graphile-worker's
// cosmiconfig, so it builds.)
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_INFO, sourceDigest } from '../bin/build-state.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  if (process.argv.includes('--if-typescript')) {
    console.log(
      'svc-platform: TypeScript is not installed (no dev dependencies): no build in dist/; the server runs its source through tsx',
    );
    process.exit(0);
  }
  console.error('svc-platform: the build needs TypeScript, a dev dependency: run npm ci');
  process.exit(1);
}
// Before compiling: a source file changed during the build makes the digest differ, and the build is not run.
const source = sourceDigest(root);
// dist.*/ is ignored by git, prettier and eslint.
const building = path.join(root, `dist.building-${process.pid}`);
const replaced = path.join(root, `dist.replaced-${process.pid}`);
let status = 1;
try {
  // Left by a build cut short (Ctrl-C) of a process with the same pid: tsc would add to its output.
  rmSync(building, { recursive: true, force: true });
  const built = spawnSync(
    process.execPath,
    [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', building],
    { stdio: 'inherit' },
  );
  status = built.status ?? 1;
  if (status === 0) {
    cpSync(path.join(root, 'src', 'store', 'migrations'), path.join(building, 'store', 'migrations'), {
      recursive: true,
    });
    writeFileSync(path.join(building, BUILD_INFO), `${JSON.stringify({ source }, null, 2)}\n`);
    try {
      if (existsSync(dist)) renameSync(dist, replaced);
      renameSync(building, dist);
    } catch (error) {
      // Another build renamed its own into place meanwhile: dist/ is that one, whole.
      console.error(
        `svc-platform: another build replaced dist/ meanwhile; this one is dropped (${error.code})`,
      );
      status = 1;
    }
  }
} finally {
  rmSync(building, { recursive: true, force: true });
  rmSync(replaced, { recursive: true, force: true });
}
process.exit(status);
