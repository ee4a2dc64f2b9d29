import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { stopLeftOverCluster } from '../../src/store/embedded-postgres.ts';

/**
 * The embedded cluster's left-over check (src/store/embedded-postgres.ts) trusts the data dir's lock file
 * only as far as the process it names is that data dir's postmaster. A stale postmaster.pid (a crash, a
 * reboot) whose pid now belongs to another PostgreSQL made `npm start` shut that one down (review).
 */
const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-left-over-'));
const running: number[] = [];
after(() => {
  for (const pid of running) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A process named `postgres` (a copy of perl, which resets SIGINT to its default: a shell's background job
 * starts with it ignored), working in `cwd`, whose parent is not node (it is orphaned at once). Returned once
 * its SIGINT handler is the default (it says so by creating a file): a SIGINT sent before would be lost.
 */
async function impostor(cwd: string): Promise<number> {
  const binary = path.join(dir, 'bin', 'postgres');
  if (!existsSync(binary)) {
    mkdirSync(path.dirname(binary), { recursive: true });
    copyFileSync('/usr/bin/perl', binary);
  }
  const ready = path.join(dir, `ready-${running.length}`);
  const pid = Number(
    execFileSync(
      'sh',
      [
        '-c',
        `"$0" -e '$SIG{INT} = "DEFAULT"; open(my $f, ">", $ARGV[0]); close($f); sleep 60' "$1" >/dev/null 2>&1 & echo $!`,
        binary,
        ready,
      ],
      { cwd, encoding: 'utf8' },
    ).trim(),
  );
  running.push(pid);
  while (!existsSync(ready)) await new Promise((resolve) => setTimeout(resolve, 10));
  return pid;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test(
  'a stale lock file naming another data dir’s PostgreSQL does not stop it',
  { skip: process.platform !== 'linux' && 'reads /proc' },
  async () => {
    const databaseDir = path.join(dir, 'data', 'pg');
    mkdirSync(databaseDir, { recursive: true });
    const elsewhere = mkdtempSync(path.join(dir, 'other-cluster-'));
    const pid = await impostor(elsewhere);
    writeFileSync(path.join(databaseDir, 'postmaster.pid'), `${pid}\n${databaseDir}\n`);
    const logged: string[] = [];
    await stopLeftOverCluster(databaseDir, (line) => logged.push(line));
    assert.ok(alive(pid), 'the other PostgreSQL was signalled');
    assert.deepEqual(logged, []);
  },
);

test(
  'one left running in this data dir (its svc was killed) is stopped',
  { skip: process.platform !== 'linux' && 'reads /proc' },
  async () => {
    const databaseDir = path.join(dir, 'mine', 'pg');
    mkdirSync(databaseDir, { recursive: true });
    const pid = await impostor(databaseDir);
    writeFileSync(path.join(databaseDir, 'postmaster.pid'), `${pid}\n${databaseDir}\n`);
    const logged: string[] = [];
    await stopLeftOverCluster(databaseDir, (line) => logged.push(line));
    assert.equal(alive(pid), false, 'still running');
    assert.match(
      logged.join('\n'),
      /stopping the embedded PostgreSQL \(pid \d+\) an earlier svc left running/,
    );
  },
);
