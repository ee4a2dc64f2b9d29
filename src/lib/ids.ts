import { randomBytes, randomInt, randomUUID } from 'node:crypto';

const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** wire-contract §4: participant codes are 6 upper-case alphanumerics. */
export function newParticipantCode(): string {
  let code = '';
  for (let i = 0; i < 6; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

export function newUuid(): string {
  return randomUUID();
}

/**
 * An API key's passphrase: 18 random bytes, base64url. Never one that starts with "-": it is typed on command
 * lines (`svc api … --passphrase P`), where such a value reads as an option and is refused (one key in 64).
 */
export function newPassphrase(): string {
  for (;;) {
    const passphrase = randomBytes(18).toString('base64url');
    if (!passphrase.startsWith('-')) return passphrase;
  }
}
