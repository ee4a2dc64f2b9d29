import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { MODULE_TRACE, modulesInTrace } from '../helpers/module-trace-file.ts';
import { PLATFORM_OFFLINE_ARGS, PROJECT_ROOT } from '../helpers/service-process.ts';

/**
 * The SDK and the CLI's client commands load no schema library and no server code. typebox alone is about
 * 1,400 module loads: through the contract's schema modules it was 0.7 s of every `svc` command's start (1.2 s
 * for `svc --help`, against 0.4 s for tsx with an empty file) and of `import 'svc-platform/sdk'`
 * (`bench/cli-start.bench.ts`). They take the contract's fixed values from `src/contract/wire-values.ts`.
 * The modules a process loads are read off node's loader (test/helpers/module-trace.mjs), not timed.
 */
const run = promisify(execFile);

/** The project-relative paths and package names of the modules `args` (after `node --import tsx`) loads. */
async function modulesLoadedBy(
  args: string[],
  { exitCode = 0 }: { exitCode?: number } = {},
): Promise<{ files: string[]; packages: string[] }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-module-trace-'));
  const traceFile = path.join(dir, 'modules.txt');
  try {
    const code = await run(process.execPath, ['--import', 'tsx', '--import', MODULE_TRACE, ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, MODULE_TRACE_FILE: traceFile },
    }).then(
      () => 0,
      (err: { code?: number }) => err.code ?? -1,
    );
    assert.equal(code, exitCode, `exit code of ${args.join(' ')}`);
    return modulesInTrace(traceFile, PROJECT_ROOT);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const SERVER_CODE = /^src\/(app\.ts|http|domain|store|jobs|main\/runtime)/;

test('the SDK loads its own files and node built-ins, nothing else', async () => {
  const { files, packages } = await modulesLoadedBy([
    '--input-type=module',
    '-e',
    "await import('./src/sdk/index.ts')",
  ]);
  assert.ok(files.includes('src/sdk/index.ts'), `the trace saw the SDK load: ${files.join(', ')}`);
  assert.deepEqual(packages, [], 'packages the SDK loads');
  for (const file of files)
    assert.match(file, /^src\/(sdk|contract)\//, `the SDK loads ${file}, outside the SDK and the contract`);
  assert.ok(
    !files.some((file) => file.endsWith('.schemas.ts')),
    `the SDK loads schema modules: ${files.filter((file) => file.endsWith('.schemas.ts')).join(', ')}`,
  );
});

test('the CLI loads no schema library and no server code for its client commands', async () => {
  // cli.ts imports every client command's module (serve and migrate load the server lazily): `--help` loads
  // them all, and a command that runs loads nothing more (here one with no server to answer: exit code 3).
  const help = await modulesLoadedBy(['src/main/cli.ts', '--help']);
  const call = await modulesLoadedBy(
    ['src/main/cli.ts', 'api', 'time', ...PLATFORM_OFFLINE_ARGS, '--no-retry'],
    { exitCode: 3 },
  );
  assert.deepEqual(call.packages, help.packages, 'packages svc api time loads beside --help');
  assert.deepEqual(
    call.files.filter((file) => !help.files.includes(file)),
    [],
    'files svc api time loads beside --help',
  );
  const { files, packages } = help;
  assert.ok(files.includes('src/cli/api-commands.ts'), `the trace saw the CLI load: ${files.join(', ')}`);
  // The configuration's own (a client command reads SVC_HOST and SVC_PORT through it), each a few functions:
  // ipaddr.js for its CIDR lists, fastest-levenshtein for a misspelt setting's likely name.
  assert.deepEqual(packages, ['fastest-levenshtein', 'ipaddr.js'], 'packages the CLI loads');
  assert.deepEqual(
    files.filter((file) => SERVER_CODE.test(file) || file.endsWith('.schemas.ts')),
    [],
    'server code or schema modules the CLI loads',
  );
});
