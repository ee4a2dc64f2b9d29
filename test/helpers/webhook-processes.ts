import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { startTestService, type TestService } from './test-service.ts';
import type { TestReceiver } from './webhook-receiver.ts';

/**
 * Real worker processes for the webhook e2e tests (issue 4 points 1, 5 and 7): `svc serve --role worker`
 * started as the foundation's entry point runs it, on the test service's database and with its secrets
 * (the worker decrypts the webhook secrets with the same key).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

export interface WorkerProcess {
  child: ChildProcess;
  /** Resolves when the process printed its start banner (the worker is running). */
  ready: Promise<void>;
  /** Resolves with the signal or code when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** The environment of a child process of the service: the test service's database and secrets. */
export function serviceEnv(svc: TestService, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: svc.database.url,
    SVC_ENV: 'cert',
    SVC_PORT: '0',
    SVC_HOST: '127.0.0.1',
    SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-worker-')),
    SVC_ADMIN_TOKEN: 'test-admin-token-0123456789',
    SVC_SECRET_KEY: svc.runtime.secrets.secretKey.toString('base64'),
    SVC_JWT_PRIVATE_KEY: svc.runtime.secrets.jwtPrivateKeyPem,
    SVC_LOG_LEVEL: 'warn',
    SVC_WORKER_POLL_INTERVAL_MS: '200',
    // Light processes: the test database server is shared by every test file running at the same time.
    SVC_WORKER_CONCURRENCY: '4',
    // A stopping worker lets its attempts finish for 2/3 of this: a test's stop waits 2 s at most.
    SVC_SHUTDOWN_TIMEOUT_MS: '3000',
    ...extra,
  };
  // A child of `node --test` would otherwise believe it is a test file itself.
  delete env.NODE_TEST_CONTEXT;
  return env;
}

export function startWorkerProcess(env: NodeJS.ProcessEnv): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main/cli.ts', 'serve', '--role', 'worker'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let resolveReady: () => void;
  let rejectReady: (error: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  const onData = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.includes('worker       running')) resolveReady();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      rejectReady(new Error(`worker exited (${signal ?? code}) before it was ready:\n${output}`));
      resolve({ code, signal });
    });
  });
  ready.catch(() => {});
  return { child, ready, exited, output: () => output };
}

/**
 * Starts a worker process and waits until it runs. A start refused by the database server because it is
 * full ("too many clients": the server is shared by every test file running at the same time) is tried
 * again; any other failure to start is the test's failure.
 */
export async function startReadyWorker(env: NodeJS.ProcessEnv, tries = 4): Promise<WorkerProcess> {
  for (let attempt = 1; ; attempt++) {
    const worker = startWorkerProcess(env);
    try {
      await worker.ready;
      return worker;
    } catch (error) {
      if (attempt >= tries || !/too many clients/.test(worker.output())) throw error;
      await new Promise((r) => setTimeout(r, 1_000 * attempt));
    }
  }
}

/** Stops a worker process politely (SIGTERM), then for sure. */
export async function stopWorkerProcess(worker: WorkerProcess): Promise<void> {
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  worker.child.kill('SIGTERM');
  const timer = setTimeout(() => worker.child.kill('SIGKILL'), 15_000);
  await worker.exited;
  clearTimeout(timer);
}

/**
 * A file whose tests run worker processes beside an API-only test service (role `api`, so that only those
 * workers deliver): starts the service before the tests, and stops every worker and receiver the tests put
 * in `workers` and `receivers`, then the service, after them.
 */
export function workersBesideApiService(): {
  readonly svc: TestService;
  workers: WorkerProcess[];
  receivers: TestReceiver[];
} {
  let svc: TestService | undefined;
  const workers: WorkerProcess[] = [];
  const receivers: TestReceiver[] = [];
  before(async () => {
    svc = await startTestService({ env: { SVC_ROLE: 'api' } });
  });
  after(async () => {
    await Promise.all(workers.map(stopWorkerProcess));
    await Promise.all(receivers.map((r) => r.close()));
    await svc?.close();
  });
  return {
    get svc() {
      if (!svc) throw new Error('the test service starts in before()');
      return svc;
    },
    workers,
    receivers,
  };
}
