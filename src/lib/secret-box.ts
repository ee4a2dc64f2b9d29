import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Authenticated encryption (AES-256-GCM) of small secrets at rest, with the server key from config.
 * wire-contract §1: a database dump alone must not be enough to sign requests.
 * node:crypto is used directly: it is the maintained primitive and the format is three fields.
 */
const VERSION = 1;

export function encryptSecret(key: Buffer, plaintext: string): Buffer {
  assertKey(key);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
}

export function decryptSecret(key: Buffer, sealed: Buffer): string {
  assertKey(key);
  if (sealed[0] !== VERSION) throw new Error('unknown secret-box version');
  const iv = sealed.subarray(1, 13);
  const tag = sealed.subarray(13, 29);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(29)), decipher.final()]).toString('utf8');
}

function assertKey(key: Buffer): void {
  if (key.length !== 32) throw new Error('secret key must be 32 bytes');
}
