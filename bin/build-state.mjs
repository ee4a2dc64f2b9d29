// Whether this package's dist/ is a build of the source beside it (bin/svc.mjs runs the build only then), and the
// digest that says so, which scripts/build.mjs records. Plain JavaScript: it runs before anything could compile
// TypeScript.
//
// A digest of the source's contents, not file times: a checkout, a copy that keeps times (cp -p, tar, rsync -a)
// or a clock that moved would make times say a stale build was current. Reading and hashing src/ (about 180
// files, 1.5 MB) takes a few milliseconds of each start. Only src/ counts: a build made with other compiler
// settings (tsconfig.build.json) or another TypeScript from the same source is taken as current.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The file dist/ records its source's digest in (written last by the build: no file, no build). */
export const BUILD_INFO = 'build-info.json';

/** The files under `dir`, as paths relative to it with `/` separators. */
function filesUnder(dir, prefix = '') {
  // A walk of our own: readdirSync's `recursive` with `withFileTypes` lost entries on Node 20.1–20.5
  // (nodejs/node#48858), and a digest that misses a file would call a stale build current.
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const relative = prefix + entry.name;
    if (entry.isDirectory()) return filesUnder(path.join(dir, entry.name), `${relative}/`);
    return entry.isFile() ? [relative] : [];
  });
}

/** SHA-256 of every file under `<root>/src`: their paths (sorted) and contents. */
export function sourceDigest(root) {
  const src = path.join(root, 'src');
  const files = filesUnder(src).sort();
  const hash = createHash('sha256');
  for (const file of files) {
    hash.update(`${file}\0`);
    hash.update(readFileSync(path.join(src, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/**
 * `<root>/dist/main/cli.js` when dist/ is a complete build of the source in `<root>/src` now, else null (no
 * build, one under way or cut short, or source changed since).
 */
export function currentBuild(root) {
  let recorded;
  try {
    recorded = JSON.parse(readFileSync(path.join(root, 'dist', BUILD_INFO), 'utf8')).source;
  } catch {
    return null;
  }
  return recorded === sourceDigest(root) ? path.join(root, 'dist', 'main', 'cli.js') : null;
}
