import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { SvcClient } from '../../src/sdk/client.ts';
import { assertOtherPlatformForbidden } from './ownership.ts';
import { startProbeApp, type ProbeApp } from './probe-app.ts';
import { startTestService, type TestService } from './test-service.ts';
import { newAccountHolder } from './funding-fixtures.ts';

/**
 * Spec 5.4: the helper every route that names a resource is checked with must itself catch a route that
 * leaks another platform's resource, answers 404 instead of 403, or refuses the owner too.
 */
let svc: TestService;
let probe: ProbeApp;
let owner: SvcClient;
let other: SvcClient;
let zrn: string;

before(async () => {
  svc = await startTestService();
  probe = await startProbeApp(svc.runtime);
  const a = await svc.newPlatform();
  const b = await svc.newPlatform();
  owner = probe.client(a.key);
  other = probe.client(b.key);
  zrn = (await newAccountHolder(svc, a.platform.platform_code)).zrn;
});
after(async () => {
  await probe?.close();
  await svc?.close();
});

test('passes for a route scoped to the calling platform (403 for B, served for A)', async () => {
  await assertOtherPlatformForbidden({ method: 'GET', path: `/probe/accounts/${zrn}` }, { owner, other });
  await assertOtherPlatformForbidden(
    { method: 'DELETE', path: `/probe/accounts/${zrn}/tenants/ABC123` },
    { owner, other },
  );
});

test('fails for a route that serves another platform’s resource', async () => {
  await assert.rejects(
    assertOtherPlatformForbidden({ method: 'GET', path: `/probe/leaky/accounts/${zrn}` }, { owner, other }),
    (error: Error) => {
      assert.equal(error.name, 'AssertionError');
      assert.match(error.message, /expected 403, got 200/);
      return true;
    },
  );
});

test('fails when the answer is not the wire-contract 403 (e.g. 404 or 401)', async () => {
  const unknown = 'zrn:svc:us:account:customer:00000000-0000-4000-8000-000000000000';
  await assert.rejects(
    assertOtherPlatformForbidden({ method: 'GET', path: `/probe/accounts/${unknown}` }, { owner, other }),
    /expected 403, got 404/,
  );
  const unsigned = probe.client({ api_key: 'nope', api_secret: 'AAAA', passphrase: 'x' });
  await assert.rejects(
    assertOtherPlatformForbidden(
      { method: 'GET', path: `/probe/accounts/${zrn}` },
      { owner, other: unsigned },
    ),
    /expected 403, got 401/,
  );
});

test('fails when the owner is refused too (a route that forbids everyone proves nothing)', async () => {
  await assert.rejects(
    assertOtherPlatformForbidden({ method: 'GET', path: `/probe/accounts/${zrn}` }, { owner: other, other }),
    /by its owner was refused/,
  );
});
