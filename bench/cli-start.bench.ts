/**
 * How long a `svc` client command and `import 'svc-platform/sdk'` take to start, against tsx starting an
 * empty file (the floor of anything run through tsx), in the same script, alternately, BENCH_RUNS (10) times
 * each; prints the medians and their ratios to the floor (1.0 = nothing loaded beyond tsx itself).
 *
 *   node --import tsx bench/cli-start.bench.ts
 *
 * With a current build (`npm run build`, which `npm ci` runs), it also measures `svc --help` as bin/svc.mjs runs
 * it: from dist/, with plain node.
 *
 * BENCH_COMPARE_DIR=<another checkout with its node_modules> measures that checkout's CLI and SDK the same
 * way, alternately with this one's. Before the client commands and the SDK took the contract's fixed values
 * from src/contract/wire-values.ts they loaded typebox through the schema modules: `svc --help` measured 2.9
 * and the SDK import 2.7 of the floor (1.2 s against 0.4 s on the development VM); see the README's CLI
 * section for today's figures.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { currentBuild } from '../bin/build-state.mjs';
import { median } from './bench-support.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const HERE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const COMPARE = process.env.BENCH_COMPARE_DIR;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-start-'));
const emptyFile = path.join(scratch, 'empty.ts');
writeFileSync(emptyFile, 'export {};\n');

interface Case {
  name: string;
  cwd: string;
  args: string[];
  /** Run through tsx (`node --import tsx`); false: plain node. */
  tsx: boolean;
}

const casesOf = (label: string, cwd: string): Case[] => [
  { name: `svc --help${label}`, cwd, args: ['src/main/cli.ts', '--help'], tsx: true },
  // bin/svc.mjs (npx svc) runs the build in dist/ with plain node while it is current (npm run build).
  ...(currentBuild(cwd)
    ? [{ name: `svc --help, the build${label}`, cwd, args: ['bin/svc.mjs', '--help'], tsx: false }]
    : []),
  {
    name: `import the SDK${label}`,
    cwd,
    args: ['--input-type=module', '-e', "await import('./src/sdk/index.ts')"],
    tsx: true,
  },
];
const floor: Case = { name: 'tsx, an empty file (floor)', cwd: HERE, args: [emptyFile], tsx: true };
const cases = [floor, ...casesOf('', HERE), ...(COMPARE ? casesOf(` (${COMPARE})`, COMPARE) : [])];

function startMs({ cwd, args, tsx }: Case): number {
  const started = performance.now();
  execFileSync(process.execPath, [...(tsx ? ['--import', 'tsx'] : []), ...args], { cwd, stdio: 'ignore' });
  return performance.now() - started;
}

try {
  // Once each first: tsx's compile cache and the file system's are warm for every measured run.
  for (const c of cases) startMs(c);
  const times = new Map(cases.map((c) => [c, [] as number[]]));
  for (let run = 0; run < RUNS; run++) for (const c of cases) times.get(c)!.push(startMs(c));
  const floorMs = median(times.get(floor)!);
  for (const c of cases) {
    const ms = median(times.get(c)!);
    console.log(
      `${c.name.padEnd(48)} ${ms.toFixed(0).padStart(6)} ms   ${(ms / floorMs).toFixed(2)} of the floor`,
    );
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
