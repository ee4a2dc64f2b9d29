/**
 * Fixture of test/e2e/webhook-outbox.test.ts (issue 4 point 1): commits a change and its notification in one
 * transaction, prints the notification id, and is SIGKILLed by itself right after the commit, before any
 * delivery could start in this process. Arguments: platform code, new platform name, resource key.
 */
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { createStore } from '../../src/store/database.ts';

const [platformCode, name, resourceKey] = process.argv.slice(2) as [string, string, string];
const store = createStore(process.env.DATABASE_URL!, { max: 1 });
const id = await store.db.transaction().execute(async (trx) => {
  await trx.updateTable('platforms').set({ name }).where('platform_code', '=', platformCode).execute();
  return recordAnyNotification(trx, {
    platformCode,
    payloadType: 'participant_status_changed',
    resourceKey,
    payload: { platform_name: name },
  });
});
process.stdout.write(`${id}\n`, () => process.kill(process.pid, 'SIGKILL'));
