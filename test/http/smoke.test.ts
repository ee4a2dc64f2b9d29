import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestService, type TestService } from '../helpers/test-service.ts';

let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

test('GET /time answers the vendor shape in epoch milliseconds', async () => {
  const { client } = await svc.newPlatform();
  const res = await client.send('GET', '/time');
  assert.equal(res.status, 200);
  const body = res.body as { message: { epoch: number; epoch_units: string; iso_8601: string } };
  assert.equal(body.message.epoch_units, 'milliseconds');
  assert.ok(Number.isInteger(body.message.epoch));
  assert.equal(new Date(body.message.iso_8601).getTime(), body.message.epoch);
});
