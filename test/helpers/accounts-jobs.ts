import { Logger, runOnce, type TaskList } from 'graphile-worker';
import { accountsTaskList } from '../../src/domain/accounts/accounts.jobs.ts';
import { createTestPool } from './database.ts';
import type { TestService } from './test-service.ts';

/**
 * The accounts jobs of a test service started without its worker (SVC_ROLE=api, as startTestService does),
 * run on demand: `run` is a graphile-worker pass that runs every queued job to completion and stops, as a
 * worker process started later would. Between passes, what is accepted and what is in effect can be told
 * apart.
 */
export function accountsJobRunner(svc: TestService): { run(): Promise<void>; close(): Promise<void> } {
  return jobRunner(svc, accountsTaskList(svc.runtime.services));
}

/** As accountsJobRunner, for any of the service's task lists. */
export function jobRunner(
  svc: TestService,
  taskList: TaskList,
): { run(): Promise<void>; close(): Promise<void> } {
  const pool = createTestPool({ connectionString: svc.database.url, max: 4 });
  // As the service's own pool (src/store/database.ts), its clients too, or graphile-worker warns on every pass.
  pool.on('connect', (client) => client.on('error', () => {}));
  const logger = new Logger(() => () => {});
  return {
    run: () =>
      runOnce({
        pgPool: pool,
        taskList,
        concurrency: 2,
        noHandleSignals: true,
        logger,
      }),
    close: () => pool.end(),
  };
}
