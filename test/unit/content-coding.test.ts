import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { isIdentityCoding } from '../../src/http/input-checks.ts';
import { PROJECT_ROOT } from '../helpers/service-process.ts';

const execFileAsync = promisify(execFile);

test('Content-Encoding: identity or nothing, in any case, white space around it', () => {
  for (const value of ['', ' ', 'identity', 'IDENTITY', ' Identity\t', '\u00a0identity'])
    assert.equal(isIdentityCoding(value), true, JSON.stringify(value));
  for (const value of ['gzip', 'identity, gzip', 'identity x', 'x', 'identityidentity'])
    assert.equal(isIdentityCoding(value), false, JSON.stringify(value));
});

test('a long run of white space before another character is judged in linear time', async () => {
  // Written ^\s*(identity)?\s*$, the two runs could split it every way: 16 KB took 0.6 s, 100 KB 14 s, this
  // hours. A regular expression holds its thread until it ends, so it runs in a process of its own, given a
  // minute (not a measure of speed: a bound that only stops a run that would take hours).
  const script = `import { isIdentityCoding } from './src/http/input-checks.ts';
    process.stdout.write(String(isIdentityCoding('\\t'.repeat(1_000_000) + 'x')));`;
  const { stdout } = await execFileAsync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { cwd: PROJECT_ROOT, timeout: 60_000 },
  );
  assert.equal(stdout, 'false');
});
