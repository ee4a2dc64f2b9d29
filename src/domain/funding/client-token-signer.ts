import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import {
  calculateJwkThumbprint,
  compactVerify,
  decodeProtectedHeader,
  importJWK,
  importPKCS8,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';

/**
 * wire-contract §6: Account Funding SDK tokens are JWTs signed by the service with an asymmetric key from
 * config (every instance signs and verifies alike), published at GET /.well-known/jwks.json. The key is the
 * PKCS#8 PEM of SVC_JWT_PRIVATE_KEY: EC P-256 signs ES256, Ed25519 signs EdDSA. Its `kid` is the RFC 7638
 * JWK thumbprint of the public key, so it changes exactly when the key does. The key it replaced
 * (SVC_JWT_PREVIOUS_KEY), if given, signs nothing but is still published and verified, so that a rotation does not
 * cut off the tokens it signed within their hour, nor their revocation (probe: both were refused at once).
 */
export const TOKEN_ISSUER = 'svc-platform';

/** The claims of wire-contract §6 (plus `iat` and `iss`), checked on every verification. */
export const ClientTokenClaims = Type.Object({
  participant_code: Type.String(),
  platform_code: Type.String(),
  permissions: Type.Array(Type.String(), { minItems: 1 }),
  jti: Type.String({ minLength: 1 }),
  iat: Type.Integer(),
  exp: Type.Integer(),
  iss: Type.Literal(TOKEN_ISSUER),
});
export type ClientTokenClaims = Static<typeof ClientTokenClaims>;

export type PublicJwk = JWK & { kid: string; alg: string; use: 'sig' };

export interface ClientTokenSigner {
  readonly kid: string;
  readonly alg: 'ES256' | 'EdDSA';
  /** The JSON Web Key Set with the public keys, the signing one first (no private part). */
  readonly jwks: { keys: PublicJwk[] };
  sign(claims: ClientTokenClaims): Promise<string>;
  /** Checks the signature, the key id and the claims' shape; not the expiry (callers decide with their clock). */
  verifySignature(token: string): Promise<ClientTokenClaims | null>;
}

function algorithmOf(key: KeyObject): 'ES256' | 'EdDSA' {
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA';
  throw new Error(
    'SVC_JWT_PRIVATE_KEY: must be a PKCS#8 PEM of an EC P-256 or Ed25519 key (an asymmetric signing key)',
  );
}

/** Synchronous check of the configured key, so that a bad key stops the process at start. */
export function signingAlgorithm(privateKeyPem: string): 'ES256' | 'EdDSA' {
  return algorithmOf(createPrivateKey(privateKeyPem));
}

/** A key's public half as the JWKS publishes it, and as verification imports it. */
async function verifyingKeyOf(privateKeyPem: string) {
  const privateKeyObject = createPrivateKey(privateKeyPem);
  const alg = algorithmOf(privateKeyObject);
  const publicJwk = createPublicKey(privateKeyObject).export({ format: 'jwk' }) as JWK;
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  return {
    kid,
    alg,
    jwk: { ...publicJwk, kid, alg, use: 'sig' as const },
    key: await importJWK(publicJwk, alg),
  };
}

export async function createClientTokenSigner(
  privateKeyPem: string,
  previousKeyPem?: string,
): Promise<ClientTokenSigner> {
  const current = await verifyingKeyOf(privateKeyPem);
  const { kid, alg } = current;
  const signingKey: CryptoKey = await importPKCS8(privateKeyPem, alg);
  const verifying = [current];
  if (previousKeyPem !== undefined) {
    const previous = await verifyingKeyOf(previousKeyPem);
    if (previous.kid !== kid) verifying.push(previous);
  }
  const byKid = new Map(verifying.map((key) => [key.kid, key]));
  const jwks = { keys: verifying.map((key) => key.jwk) };

  return {
    kid,
    alg,
    jwks,
    async sign(claims) {
      const { iat, exp, ...rest } = claims;
      return new SignJWT(rest)
        .setProtectedHeader({ alg, kid, typ: 'JWT' })
        .setIssuedAt(iat)
        .setExpirationTime(exp)
        .sign(signingKey);
    },
    async verifySignature(token) {
      try {
        // A token signed with another key (or one older than the previous) is not ours: refused before any crypto.
        const key = byKid.get(String(decodeProtectedHeader(token).kid));
        if (!key) return null;
        const { payload } = await compactVerify(token, key.key, { algorithms: [key.alg] });
        const claims: unknown = JSON.parse(new TextDecoder().decode(payload));
        return Value.Check(ClientTokenClaims, claims) ? claims : null;
      } catch {
        return null;
      }
    },
  };
}
