import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readCoordinate } from '../../src/contract/coordinates.ts';

/** A customer's proof_of_address_coordinates read as decimal degrees (vendor PostCustomersBody). */
test('degrees, minutes and seconds become decimal degrees to 6 places; south and west are negative', () => {
  assert.deepEqual(readCoordinate('N 51d 30.000000m 40.190000', 'latitude'), { degrees: '51.511164' });
  assert.deepEqual(readCoordinate('S 33d 52m 7.68', 'latitude'), { degrees: '-33.868800' });
  assert.deepEqual(readCoordinate('W 0d 4m 59.94', 'longitude'), { degrees: '-0.083317' });
  assert.deepEqual(readCoordinate('E 180d 0m 0', 'longitude'), { degrees: '180.000000' });
  // No negative zero.
  assert.deepEqual(readCoordinate('S 0d 0m 0.0000001', 'latitude'), { degrees: '0.000000' });
});

test('decimal degrees come back as sent', () => {
  assert.deepEqual(readCoordinate('-0.083317', 'longitude'), { degrees: '-0.083317' });
  assert.deepEqual(readCoordinate('90', 'latitude'), { degrees: '90' });
});

test('what names no place on the globe is refused, saying why', () => {
  assert.deepEqual(readCoordinate('90.000001', 'latitude'), {
    problem: 'must be between -90 and 90 degrees',
  });
  assert.deepEqual(readCoordinate('-180.5', 'longitude'), {
    problem: 'must be between -180 and 180 degrees',
  });
  assert.deepEqual(readCoordinate('N 89d 59m 60', 'latitude'), {
    problem: 'must have minutes and seconds below 60',
  });
  assert.deepEqual(readCoordinate('N 90d 0m 0.1', 'latitude'), {
    problem: 'must be between -90 and 90 degrees',
  });
  assert.deepEqual(readCoordinate('W 10d 0m 0', 'latitude'), { problem: 'takes N or S, not W' });
  assert.deepEqual(readCoordinate('N 10d 0m 0', 'longitude'), { problem: 'takes E or W, not N' });
});
