import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/**
 * The real `svc` entry point in a child process (`node --import tsx src/main/cli.ts …`), for tests of what
 * an operator runs. Tests must call `kill()` in an `after` hook so that no process outlives a failing test.
 */
export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

/** An operator's token and a URL where no server listens: a command that sends anything exits 3. */
export const OPERATOR_OFFLINE_ARGS = ['--url', 'http://127.0.0.1:9', '--token', 't'];
/** `svc api` credentials and a URL where no server listens. */
export const PLATFORM_OFFLINE_ARGS = [
  '--api-key',
  'k',
  '--api-secret',
  's',
  '--passphrase',
  'p',
  '--url',
  'http://127.0.0.1:9',
];

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stdout; rejects after `timeoutMs` or if the process exits. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Resolves when the process exits (already exited → at once). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** SIGKILL if still running; safe to call any number of times. */
  kill(): void;
}

/** The environment of a child `svc`: the test runner's own variables, minus the ones that would leak in. */
export function childEnv(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // A child must not think it is part of this test run, nor inherit the suite's database by accident.
  for (const name of ['NODE_TEST_CONTEXT', 'DATABASE_URL', 'REDIS_URL', 'SVC_ADMIN_TOKEN', 'SVC_URL']) {
    delete env[name];
  }
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/**
 * `processGroup`: the process leads a process group of its own, as a command started in a terminal does, so a
 * test can signal the whole group as the terminal's Ctrl-C does (`process.kill(-child.pid, 'SIGINT')`).
 */
export function startCli(
  args: string[],
  env: Record<string, string | undefined>,
  {
    processGroup = false,
    entry = ['--import', 'tsx', 'src/main/cli.ts'],
    cwd = PROJECT_ROOT,
  }: {
    processGroup?: boolean;
    /** node's arguments before the CLI's: the source through tsx by default, `[<pkg>/bin/svc.mjs]` for the bin. */
    entry?: string[];
    /** Where it runs (the project by default; the default entry is relative to it). */
    cwd?: string;
  } = {},
): CliProcess {
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: processGroup,
  });
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const listener of listeners) listener();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on('exit', (code, signal) => {
      const result = { code, signal, at: Date.now() };
      resolve(result);
      for (const listener of listeners) listener();
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(out);
          if (match) {
            done();
            resolve(match);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(
              new Error(
                `svc exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${out}\n${err}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`svc did not print ${pattern} within ${timeoutMs} ms:\n${out}\n${err}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** Runs `svc <args>` to completion (at most `timeoutMs`) and returns its exit code and output. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = startCli(args, env);
  const timer = setTimeout(() => proc.kill(), timeoutMs);
  try {
    const { code } = await proc.exited;
    return { code, stdout: proc.stdout(), stderr: proc.stderr() };
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `probe` until it returns a value other than undefined, for at most `timeoutMs`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
