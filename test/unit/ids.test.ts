import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newPassphrase } from '../../src/lib/ids.ts';

test('a passphrase is 24 base64url characters and never starts with "-" (a command line reads that as an option)', () => {
  // One in 64 would, drawn freely: 5,000 draws meet such a first character about 78 times.
  for (let i = 0; i < 5_000; i++) {
    const passphrase = newPassphrase();
    assert.match(passphrase, /^[A-Za-z0-9_][A-Za-z0-9_-]{23}$/);
  }
});
