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
 * JWK thumbprint of the public key, so it changes exactly when the key does.
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
  /** The JSON Web Key Set with the public key (no private part). */
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

export async function createClientTokenSigner(privateKeyPem: string): Promise<ClientTokenSigner> {
  const privateKeyObject = createPrivateKey(privateKeyPem);
  const alg = algorithmOf(privateKeyObject);
  const publicJwk = createPublicKey(privateKeyObject).export({ format: 'jwk' }) as JWK;
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  const signingKey: CryptoKey = await importPKCS8(privateKeyPem, alg);
  const verifyingKey = await importJWK(publicJwk, alg);
  const jwks = { keys: [{ ...publicJwk, kid, alg, use: 'sig' as const }] };

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
        // A token signed with another key (or an old one) is not ours: refuse before any crypto.
        if (decodeProtectedHeader(token).kid !== kid) return null;
        const { payload } = await compactVerify(token, verifyingKey, { algorithms: [alg] });
        const claims: unknown = JSON.parse(new TextDecoder().decode(payload));
        return Value.Check(ClientTokenClaims, claims) ? claims : null;
      } catch {
        return null;
      }
    },
  };
}
