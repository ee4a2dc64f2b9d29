// `npm run build:sdk` (and `prepare`, which npm runs on `npm ci`, `npm install` and for a git dependency): builds
// the SDK into dist/ (tsconfig.sdk.json), JavaScript with declarations, for projects that import
// `svc-platform/sdk` (package.json `exports`). Clean each time: tsc leaves the output of deleted sources behind, and
// an incremental build did not re-create deleted outputs (review). Plain JavaScript: it runs before anything could
// compile TypeScript.
//
// --if-typescript (prepare): a production install without dev dependencies (`npm ci --omit=dev`) has no
// TypeScript compiler; the server does not need dist/, so the install goes on without it, and says so.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  if (process.argv.includes('--if-typescript')) {
    console.log(
      'svc-platform: TypeScript is not installed (no dev dependencies): the SDK is not built into dist/',
    );
    process.exit(0);
  }
  console.error('svc-platform: the SDK build needs TypeScript, a dev dependency: run npm ci');
  process.exit(1);
}
rmSync(path.join(root, 'dist'), { recursive: true, force: true });
const built = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.sdk.json')], {
  stdio: 'inherit',
});
process.exit(built.status ?? 1);
