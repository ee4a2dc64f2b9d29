import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { randomBytes } from 'node:crypto';
import type { DomainDeps } from '../../src/domain/deps.ts';
import { createClientTokenSigner, TOKEN_ISSUER } from '../../src/domain/funding/client-token-signer.ts';
import { createFundingService } from '../../src/domain/funding/funding.service.ts';

/** wire-contract §6: SDK tokens signed with the asymmetric key from config; any instance with it agrees. */
const pem = (type: 'ec' | 'ed25519' | 'rsa') =>
  (type === 'ec'
    ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : type === 'rsa'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : generateKeyPairSync('ed25519')
  ).privateKey
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();

const claims = () => {
  const now = Math.floor(Date.now() / 1000);
  return {
    participant_code: 'ABC123',
    platform_code: 'PLT001',
    permissions: ['fwc'],
    jti: '6f1c1f5e-3a59-4b6e-9d0e-4c1a3f1e2b3c',
    iat: now,
    exp: now + 3600,
    iss: TOKEN_ISSUER,
  } as const;
};

test('EC P-256 signs ES256 and Ed25519 signs EdDSA; each token verifies with the published JWKS', async () => {
  for (const [type, alg] of [
    ['ec', 'ES256'],
    ['ed25519', 'EdDSA'],
  ] as const) {
    const signer = await createClientTokenSigner(pem(type));
    assert.equal(signer.alg, alg);
    // One set of claims, signed and compared: two calls a second boundary apart would differ in iat.
    const signed = { ...claims(), permissions: ['fwc'] };
    const token = await signer.sign(signed);
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(signer.jwks));
    assert.equal(protectedHeader.kid, signer.kid);
    assert.equal(payload.participant_code, 'ABC123');
    assert.deepEqual(await signer.verifySignature(token), signed);
  }
});

test('two instances configured with the same key publish the same key id and accept each other’s tokens', async () => {
  const key = pem('ec');
  const one = await createClientTokenSigner(key);
  const two = await createClientTokenSigner(key);
  assert.equal(one.kid, two.kid);
  assert.deepEqual(one.jwks, two.jwks);
  assert.ok(await two.verifySignature(await one.sign({ ...claims(), permissions: ['fwc'] })));
});

test('a token from another key, a tampered one or garbage is not ours', async () => {
  const signer = await createClientTokenSigner(pem('ec'));
  const stranger = await createClientTokenSigner(pem('ec'));
  const foreign = await stranger.sign({ ...claims(), permissions: ['fwc'] });
  assert.equal(await signer.verifySignature(foreign), null);

  const token = await signer.sign({ ...claims(), permissions: ['fwc'] });
  const [header, , signature] = token.split('.');
  const payload = Buffer.from(JSON.stringify({ ...claims(), participant_code: 'EVE666' })).toString(
    'base64url',
  );
  assert.equal(await signer.verifySignature(`${header}.${payload}.${signature}`), null);
  assert.equal(await signer.verifySignature('a.b.c'), null);
  assert.equal(await signer.verifySignature(''), null);
});

test('a key that cannot sign asymmetric JWTs of our kinds is refused at start', async () => {
  await assert.rejects(createClientTokenSigner(pem('rsa')), /EC P-256 or Ed25519/);
  // The service checks the key when it is built, so a misconfigured instance does not start.
  assert.throws(
    () => createFundingService({ secretKey: randomBytes(32), jwtPrivateKeyPem: pem('rsa') } as DomainDeps),
    /SVC_JWT_PRIVATE_KEY/,
  );
  assert.ok(createFundingService({ secretKey: randomBytes(32), jwtPrivateKeyPem: pem('ec') } as DomainDeps));
});

test('after a rotation, the previous key is published and verified, never signing; other keys stay strangers', async () => {
  // Probe: a restart with a new SVC_JWT_PRIVATE_KEY refused every token of the past hour, and their revocation.
  const [oldKey, newKey] = [pem('ec'), pem('ed25519')];
  const before = await createClientTokenSigner(oldKey);
  const issued = { ...claims(), permissions: ['fwc'] };
  const oldToken = await before.sign(issued);
  const after = await createClientTokenSigner(newKey, oldKey);
  assert.deepEqual(
    after.jwks.keys.map((key) => [key.kid, key.alg]),
    [
      [after.kid, 'EdDSA'],
      [before.kid, 'ES256'],
    ],
    'the signing key first, then the previous one',
  );
  assert.deepEqual(await after.verifySignature(oldToken), issued);
  assert.equal((await jwtVerify(oldToken, createLocalJWKSet(after.jwks))).protectedHeader.kid, before.kid);
  const newToken = await after.sign(issued);
  assert.equal((await jwtVerify(newToken, createLocalJWKSet(after.jwks))).protectedHeader.kid, after.kid);
  // Without it, as before: the old token is not ours.
  assert.equal(await (await createClientTokenSigner(newKey)).verifySignature(oldToken), null);
  const stranger = await createClientTokenSigner(pem('ec'));
  assert.equal(await after.verifySignature(await stranger.sign(issued)), null);
  // The previous key given as the current one again is published once.
  assert.equal((await createClientTokenSigner(newKey, newKey)).jwks.keys.length, 1);
});
