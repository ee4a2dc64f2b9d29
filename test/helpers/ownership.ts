import assert from 'node:assert/strict';
import type { RequestOptions, SvcClient } from '../../src/sdk/client.ts';

/**
 * Spec 5.4 / wire-contract §9: a resource named in the path that belongs to another platform → 403.
 * Given a route and a resource of platform A, asserts that platform B gets 403 with the wire body, and
 * (unless `checkOwner` is false, e.g. for a route that changes state) that A itself is not refused.
 * Every public route that names a resource is checked with this helper.
 */
export async function assertOtherPlatformForbidden(
  route: { method: string; path: string; options?: RequestOptions },
  clients: { owner: SvcClient; other: SvcClient },
  checkOwner = true,
): Promise<void> {
  const refused = await clients.other.send(route.method, route.path, route.options);
  assert.equal(
    refused.status,
    403,
    `${route.method} ${route.path} by another platform: expected 403, got ${refused.status} ${JSON.stringify(refused.body)}`,
  );
  const body = refused.body as { error?: unknown; message?: unknown };
  assert.equal(body.error, true);
  assert.equal(typeof body.message, 'string');
  if (checkOwner) {
    const allowed = await clients.owner.send(route.method, route.path, route.options);
    assert.notEqual(
      allowed.status,
      403,
      `${route.method} ${route.path} by its owner was refused: ${JSON.stringify(allowed.body)}`,
    );
  }
}
