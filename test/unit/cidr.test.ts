import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CidrSet, cidrKey, familiesCoveredWhole } from '../../src/lib/cidr.ts';

/**
 * wire-contract §2.2: an allow-all list is for cert only, whichever way it is written. IPv4 peers match IPv6
 * ranges through ::ffff:0:0/96, so an IPv6 range over it lets every IPv4 address in.
 */
test('familiesCoveredWhole: every address of a family, in one range or in pieces', () => {
  const cases: Array<[string[], string[]]> = [
    [['0.0.0.0/0'], ['IPv4']],
    [['::/0'], ['IPv4', 'IPv6']],
    [['::ffff:0:0/96'], ['IPv4']],
    [['::ffff:0.0.0.0/96'], ['IPv4']],
    [['::/80'], ['IPv4']],
    [['::ffff:0:0/95'], ['IPv4']],
    [['0.0.0.0/1', '128.0.0.0/1'], ['IPv4']],
    [
      ['::/1', '8000::/1'],
      ['IPv4', 'IPv6'],
    ],
    [['0.0.0.0/1', '::ffff:128.0.0.0/97'], ['IPv4']],
    [['0.0.0.0/1'], []],
    [['::ffff:0:0/97'], []],
    [['10.0.0.0/8', 'fd00::/8', '::ffff:10.0.0.0/104'], []],
    [['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3', '224.0.0.0/4'], []],
    [['not a cidr'], []],
    // Zone ids name an interface; ipaddr.js refuses these spellings, which threw.
    [['fe80::1%br-lan/64', 'fe80::1%eth0.10', 'fe80::1%veth:x/10'], []],
    [['::%br-lan/0'], ['IPv4', 'IPv6']],
  ];
  for (const [cidrs, families] of cases)
    assert.deepEqual(familiesCoveredWhole(cidrs), families, cidrs.join());
  // What "covered" means here is what CidrSet lets in.
  for (const ip of ['8.8.8.8', '203.0.113.7', '255.255.255.255', '0.0.0.0'])
    assert.equal(new CidrSet(['::/80']).has(ip), true, ip);
});

test('cidrKey: one key for a range however written, an IPv4 range in its IPv4-mapped IPv6 form included', () => {
  const same = (a: string, b: string) => assert.equal(cidrKey(a), cidrKey(b), `${a} = ${b}`);
  const different = (a: string, b: string) => assert.notEqual(cidrKey(a), cidrKey(b), `${a} ≠ ${b}`);
  same('1.2.3.4', '1.2.3.4/32');
  same('1.2.3.9/24', '1.2.3.0/24');
  same('2001:DB8::1', '2001:db8::1/128');
  // Probe: listed together, both forms were stored as two ranges.
  same('::ffff:1.2.3.4', '1.2.3.4');
  same('::ffff:102:304', '1.2.3.4');
  same('::ffff:1.2.3.0/120', '1.2.3.0/24');
  same('::ffff:0:0/96', '0.0.0.0/0');
  different('::ffff:0:0/95', '0.0.0.0/0'); // wider than IPv4: an IPv6 range
  different('1.2.3.0/24', '1.2.3.0/25');
  // IPv4-compatible, not mapped: no IPv4 peer is in it, for the firewall (node's BlockList) as for this key (review:
  // ipaddr.js read it as mapped).
  different('::1.2.3.4', '1.2.3.4');
  same('::1.2.3.4', '::102:304');
  assert.equal(new CidrSet(['::1.2.3.4']).has('1.2.3.4'), false);
  assert.deepEqual(familiesCoveredWhole(['::0.0.0.0/96']), []);
  assert.equal(new CidrSet(['::0.0.0.0/96']).has('8.8.8.8'), false);
  assert.equal(cidrKey('1.2.3.4/33'), null);
});

test('CidrSet: an address with a zone id is its address, in every form (the longest too)', () => {
  // Review: BlockList refused the zone on the 45-character form, so the firewall's load threw for every request.
  const longest = 'ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255';
  const set = new CidrSet([`${longest}%eth0`, 'fe80::1%br-lan']);
  assert.equal(set.has(longest), true);
  assert.equal(set.has('fe80::1'), true);
  assert.equal(set.has('fe80::2'), false);
  // And an address checked with one (a forwarded address may carry it).
  assert.equal(set.has(`${longest}%eth0`), true);
  assert.equal(set.has('fe80::1%eth1'), true);
});
