import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { eventually, PROJECT_ROOT } from '../helpers/service-process.ts';

/**
 * The embedded PostgreSQL's processes run in a process group of their own (a terminal's Ctrl-C must not stop them
 * under svc's shutdown), so nothing stops them with svc: while they start, svc's exit does
 * (`spawnedInOwnGroupWhileStarting`). Review: an initdb, then a starting postmaster, were left running when svc's
 * stop bound ended the process during a start. Here a process spawned during a start that never ends stands for them.
 */
const run = promisify(execFile);

test('a process spawned in its own group during a start is signalled when this process exits meanwhile', async () => {
  const source = `import { spawn } from 'node:child_process';
import { spawnedInOwnGroupWhileStarting } from ${JSON.stringify(`${PROJECT_ROOT}/src/store/embedded-postgres.ts`)};
void spawnedInOwnGroupWhileStarting(
  () =>
    new Promise(() => {
      const child = spawn('sleep', ['60'], { stdio: 'ignore' });
      console.log(child.pid);
      setTimeout(() => process.exit(1), 200);
    }),
  'SIGTERM',
);`;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: PROJECT_ROOT,
    timeout: 20_000,
  }).catch((err: { code?: number; stdout?: string }) => {
    assert.equal(err.code, 1, 'the process ended as it was made to');
    return { stdout: err.stdout ?? '' };
  });
  const pid = Number(stdout.trim());
  assert.ok(pid > 0, stdout);
  try {
    await eventually(
      async () => (existsSync(`/proc/${pid}`) ? undefined : true),
      10_000,
      'the spawned process ended',
    );
  } finally {
    if (existsSync(`/proc/${pid}`)) process.kill(pid, 'SIGKILL');
  }
});
