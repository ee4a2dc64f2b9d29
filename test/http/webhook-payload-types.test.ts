import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AccountBalanceChanged, ParticipantStatusChanged } from 'svc-platform/sdk';
import { notificationsOf } from '../helpers/funding-fixtures.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { fund } from '../helpers/trades-fixtures.ts';

/**
 * The SDK's payload types are the bodies the service sends: each sample below must be a whole value of its type
 * (the type check refuses a field the type lacks), and a real notification carries exactly the sample's fields
 * (probe: the SDK had no type for these two, so receivers wrote their own, with fields missing).
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const keysOf = (value: object) => Object.keys(value).sort();

test('account_balance.changed carries exactly the fields of AccountBalanceChanged', async () => {
  const { platform } = await svc.newPlatform();
  const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
  await fund(svc, holder, 'USD', '12.5');
  const [note] = await notificationsOf(svc, platform.platform_code, 'account_balance.changed');
  const sample: Required<AccountBalanceChanged> = {
    participant_code: '',
    account_group: '',
    account_label: '',
    account_type: 'available',
    asset: '',
    balance: '',
    run_id: '',
    run_type: '',
    timestamp: 0,
    movements: [{ account_id: '', change: '', movement_id: '', movement_timestamp: 0, movement_type: '' }],
  };
  const payload = note!.payload as unknown as AccountBalanceChanged;
  assert.deepEqual(keysOf(payload), keysOf(sample));
  assert.deepEqual(keysOf(payload.movements[0]!), keysOf(sample.movements[0]!));
  assert.deepEqual([payload.participant_code, payload.balance], [holder, '12.5']);
});

test('participant_status_changed carries exactly the fields of ParticipantStatusChanged', async () => {
  const { platform } = await svc.newPlatform();
  const code = (await svc.newParticipant(platform.platform_code)).participant_code;
  const locked = await svc.operatorCall('PATCH', `/participants/${code}`, {
    status: 'locked',
    reason_code: 'fraud_review',
  });
  assert.equal(locked.status, 200, locked.text);
  const notes = await notificationsOf(svc, platform.platform_code, 'participant_status_changed');
  const payload = notes.at(-1)!.payload as unknown as ParticipantStatusChanged;
  const sample: Required<ParticipantStatusChanged> = {
    participant_code: '',
    participant_status: 'locked',
    reason_code: '',
    timestamp: 0,
  };
  assert.deepEqual(keysOf(payload), keysOf(sample));
  assert.deepEqual(
    [payload.participant_code, payload.participant_status, payload.reason_code],
    [code, 'locked', 'fraud_review'],
  );
});
