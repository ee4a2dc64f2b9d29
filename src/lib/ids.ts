import { randomInt, randomUUID } from 'node:crypto';

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
