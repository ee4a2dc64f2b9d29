import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import {
  clientToken,
  newAccountHolder,
  recordDeposit,
  fundQuote,
  setPrices,
} from '../helpers/funding-fixtures.ts';

/** Issue 6 point 1: POST /client_auth_token, the JWKS, POST /revoke_auth_token (spec 4.3, wire-contract §6). */
let svc: TestService;
let owner: PlatformFixture;
let other: PlatformFixture;
before(async () => {
  svc = await startTestService();
  owner = await svc.newPlatform();
  other = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

async function jwks() {
  const res = await fetch(new URL('/.well-known/jwks.json', svc.url));
  assert.equal(res.status, 200);
  return (await res.json()) as { keys: Array<JWK & { kid: string }> };
}

describe('POST /client_auth_token', () => {
  test('answers 201 {"message":{"token"}} with a JWT carrying the claims of wire-contract §6, verifiable with the published JWKS', async () => {
    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const res = await owner.client.send<{ message: { token: string; deposit_intent_id?: string } }>(
      'POST',
      '/client_auth_token',
      { body: { participant_code: code, permissions: ['fwc'], reference_id: 'order-42' } },
    );
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'ClientAuthTokenResponse');
    const { token, deposit_intent_id } = res.body.message;
    assert.match(deposit_intent_id ?? '', /^[0-9a-f-]{36}$/);

    const keySet = createLocalJWKSet(await jwks());
    const { payload, protectedHeader } = await jwtVerify(token, keySet, { issuer: 'svc-platform' });
    assert.equal(protectedHeader.alg, 'ES256');
    assert.equal(payload.participant_code, code);
    assert.deepEqual(payload.permissions, ['fwc']);
    assert.equal(payload.platform_code, owner.platform.platform_code);
    assert.match(String(payload.jti), /^[0-9a-f-]{36}$/);
    // wire-contract §6: lifetime one hour.
    assert.equal(payload.exp! - payload.iat!, 3600);
  });

  test('the signing key is the one in config: the JWKS key is its public half and the kid its JWK thumbprint', async () => {
    const { keys } = await jwks();
    assert.equal(keys.length, 1);
    const key = keys[0]!;
    assert.equal(key.d, undefined, 'no private part is published');
    const expected = createPublicKey(svc.runtime.secrets.jwtPrivateKeyPem).export({ format: 'jwk' });
    assert.equal(key.x, expected.x);
    assert.equal(key.y, expected.y);
    const { calculateJwkThumbprint } = await import('jose');
    assert.equal(key.kid, await calculateJwkThumbprint(expected as JWK, 'sha256'));

    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const { token } = await clientToken(owner.client, { participant_code: code });
    assert.equal(decodeProtectedHeader(token).kid, key.kid);
  });

  test('GET /.well-known/jwks.json needs no API key', async () => {
    const res = await fetch(new URL('/.well-known/jwks.json', svc.url));
    assert.equal(res.status, 200);
    assert.ok(((await res.json()) as { keys: unknown[] }).keys.length > 0);
  });

  test('with fwc the token opens a funding session carrying reference_id; without fwc no session is opened', async () => {
    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const quote = await fundQuote(owner.client, { participant_code: code, fund_asset: 'BTC.BTC' });
    // Without fwc: no session, so the rfq session above (no reference) stays the most recent.
    const plain = await clientToken(owner.client, {
      participant_code: code,
      permissions: ['onboarding'],
      reference_id: 'not-a-funding-session',
    });
    assert.equal(plain.deposit_intent_id, undefined);
    const first = await recordDeposit(svc, { deposit_address: quote.deposit_address, quantity: '0.1' });
    assert.equal(first.reference_id, '');

    await clientToken(owner.client, { participant_code: code, reference_id: 'sdk-ref-1' });
    const second = await recordDeposit(svc, { deposit_address: quote.deposit_address, quantity: '0.2' });
    assert.equal(second.reference_id, 'sdk-ref-1');
  });

  test('every bad field gets a 400 naming it', async () => {
    const res = await owner.client.send<{ errors: string[] }>('POST', '/client_auth_token', {
      body: {
        participant_code: 'AB',
        permissions: ['fwc', 'nope'],
        reference_id: 'x'.repeat(51),
        email: 'not-an-email',
      },
    });
    assert.equal(res.status, 400);
    const errors = res.body.errors.join('\n');
    for (const field of ['participant_code', 'permissions[1]', 'reference_id', 'email'])
      assert.match(errors, new RegExp(`^${field.replace(/[[\]]/g, '\\$&')}: `, 'm'), `${field} in ${errors}`);

    const empty = await owner.client.send<{ errors: string[] }>('POST', '/client_auth_token', {
      body: { participant_code: 'ABCDEF', permissions: [] },
    });
    assert.equal(empty.status, 400);
    assert.match(empty.body.errors.join('\n'), /^permissions: /m);

    const duplicate = await owner.client.send<{ errors: string[] }>('POST', '/client_auth_token', {
      body: { participant_code: 'ABCDEF', permissions: ['fwc', 'fwc'] },
    });
    assert.equal(duplicate.status, 400);
    assert.match(duplicate.body.errors.join('\n'), /^permissions: /m);

    const missing = await owner.client.send<{ errors: string[] }>('POST', '/client_auth_token', { body: {} });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body.errors.sort(), [
      'participant_code: is required',
      'permissions: is required',
    ]);
  });

  test('the participant must be an approved participant of the calling platform (400 naming participant_code)', async () => {
    const theirs = await newAccountHolder(svc, other.platform.platform_code);
    const pending = await svc.newParticipant(owner.platform.platform_code, { status: 'submitted' });
    for (const code of [theirs.code, pending.participant_code, 'ZZZZZZ']) {
      const res = await owner.client.send<{ errors: string[] }>('POST', '/client_auth_token', {
        body: { participant_code: code, permissions: ['fwc'] },
      });
      assert.equal(res.status, 400, `${code}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.errors[0]!, /^participant_code: /);
    }
  });
});

describe('POST /revoke_auth_token', () => {
  test('revokes: the token no longer verifies; revoking again is harmless', async () => {
    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const { token } = await clientToken(owner.client, { participant_code: code });
    const claims = await svc.runtime.services.funding.verifyClientToken(token);
    assert.equal(claims.participant_code, code);

    const res = await owner.client.send('POST', '/revoke_auth_token', { body: { token } });
    assert.equal(res.status, 204);
    await assert.rejects(svc.runtime.services.funding.verifyClientToken(token), /token: revoked/);
    const again = await owner.client.send('POST', '/revoke_auth_token', { body: { token } });
    assert.equal(again.status, 204);
  });

  test("another platform's token is unknown (wire-contract §9: named in the body): 400, and it stays valid", async () => {
    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const { token } = await clientToken(owner.client, { participant_code: code });
    const res = await other.client.send<{ errors: string[] }>('POST', '/revoke_auth_token', {
      body: { token },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, ['token: is not a token issued by this service']);
    await svc.runtime.services.funding.verifyClientToken(token);
    // The owner may revoke it (the helper's owner check, done here since it changes state).
    assert.equal((await owner.client.send('POST', '/revoke_auth_token', { body: { token } })).status, 204);
  });

  test('a token not issued by this service, or a bad body, → 400 naming token', async () => {
    const { code } = await newAccountHolder(svc, owner.platform.platform_code);
    const { token } = await clientToken(owner.client, { participant_code: code });
    const [header, payload] = token.split('.');
    const forged = `${header}.${payload}.${Buffer.from('not the signature').toString('base64url')}`;
    for (const body of [{ token: 'not-a-jwt' }, { token: forged }, {}, { token: 7 }]) {
      const res = await owner.client.send<{ errors: string[] }>('POST', '/revoke_auth_token', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.body.errors[0]!, /^token: /);
    }
    await assert.rejects(svc.runtime.services.funding.verifyClientToken(forged), /token: invalid/);
  });
});

describe('GET /.well-known/jwks.json behind the firewall', () => {
  let proxied: TestService;
  before(async () => {
    // A trusted proxy lets the test present another source IP (wire-contract §2.4) without leaving loopback.
    proxied = await startTestService({
      env: { SVC_TRUST_PROXY: '127.0.0.1/32,::1/128', SVC_RATE_LIMIT: '5' },
    });
    await proxied.newPlatform();
  });
  after(() => proxied?.close());

  test('a source IP on no allow-list gets 1020, like GET /time', async () => {
    for (const path of ['/.well-known/jwks.json', '/time']) {
      const res = await fetch(new URL(path, proxied.url), { headers: { 'x-forwarded-for': '203.0.113.7' } });
      assert.equal(res.status, 403, path);
      assert.equal(await res.text(), 'error code: 1020');
    }
    const allowed = await fetch(new URL('/.well-known/jwks.json', proxied.url));
    assert.equal(allowed.status, 200);
  });

  test('and behind the per-IP rate limit (here 5 requests per window)', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await fetch(new URL('/.well-known/jwks.json', proxied.url))).status);
    }
    assert.ok(statuses.includes(429), statuses.join(','));
    const refused = await fetch(new URL('/.well-known/jwks.json', proxied.url));
    assert.equal(refused.status, 429);
    assert.deepEqual(await refused.json(), { error: 'Too Many Requests' });
  });
});
