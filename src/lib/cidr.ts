import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Parses a CIDR ("10.0.0.0/8", "::1/128") or a bare address; null when invalid. */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address, prefixText, extra] = text.trim().split('/');
  if (extra !== undefined || !address) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!/^\d+$/.test(prefixText ?? String(max)) || prefix < 0 || prefix > max) return null;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * An address as a number: 32 bits for IPv4, 128 for IPv6 (ipaddr.js, the parser proxy-addr uses). Without
 * its zone id (`fe80::1%br-lan`), which names a local interface, not addresses, and which ipaddr.js refuses
 * with a `-`, `.` or `:` in it (review: a stored one made the firewall's load throw, a 500 for every request).
 */
function addressValue(address: string): bigint {
  return ipaddr
    .parse(withoutDottedQuad(withoutZone(address)))
    .toByteArray()
    .reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

/** An address without its zone id (`fe80::1%br-lan`), which names a local interface, not addresses. */
function withoutZone(address: string): string {
  return address.split('%', 1)[0]!;
}

/**
 * An IPv6 address ending in a dotted quad, with that quad as its two hex groups: ipaddr.js reads any such address
 * as IPv4-mapped (`::1.2.3.4` as `::ffff:1.2.3.4`), while node's BlockList, which the firewall matches with, reads
 * `::1.2.3.4` as `::102:304`, which no IPv4 peer is (review: it was called the same range as `1.2.3.4`, and an
 * allow-all in prod when written `::0.0.0.0/96`). The same address in the form both read alike.
 */
function withoutDottedQuad(address: string): string {
  const quad = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  if (!quad || !address.includes(':')) return address;
  const [a, b, c, d] = quad.slice(2).map(Number) as [number, number, number, number];
  return `${quad[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/**
 * The range a CIDR names, as one key, the same however it is written (`10.0.0.1` and `10.0.0.1/32`, IPv6 in any
 * form, host bits set or not); null when it is not a CIDR.
 */
export function cidrKey(text: string): string | null {
  const cidr = parseCidr(text);
  if (!cidr) return null;
  const value = addressValue(cidr.address);
  // An IPv4 range written in its IPv4-mapped IPv6 form (`::ffff:1.2.3.4`, `::ffff:1.2.3.0/120`) is that IPv4 range:
  // the firewall matches IPv4 peers through it alike (probe: both forms were stored as two ranges).
  if (cidr.family === 'ipv6' && cidr.prefix >= 96 && value >> 32n === MAPPED_START >> 32n) {
    const prefix = cidr.prefix - 96;
    return `ipv4/${prefix}/${(value & 0xffff_ffffn) >> BigInt(32 - prefix)}`;
  }
  const bits = cidr.family === 'ipv4' ? 32n : 128n;
  return `${cidr.family}/${cidr.prefix}/${value >> (bits - BigInt(cidr.prefix))}`;
}

const IPV4_SPACE = 2n ** 32n;
const IPV6_SPACE = 2n ** 128n;
/** ::ffff:0:0/96, where IPv4 addresses are matched among IPv6 ranges (CidrSet, BlockList). */
const MAPPED_START = 0xffff_0000_0000n;

/** Whether ranges [start, end) together cover [0, size). */
function coverWhole(ranges: Array<[bigint, bigint]>, size: bigint): boolean {
  let reached = 0n;
  for (const [start, end] of ranges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    if (start > reached) return false;
    if (end > reached) reached = end;
  }
  return reached >= size;
}

/**
 * The address families that `cidrs` (valid ones; others are ignored) take in whole, together: `0.0.0.0/0`,
 * `0.0.0.0/1` with `128.0.0.0/1`, or any IPv6 range over `::ffff:0:0/96` (`::/80`), through which every IPv4
 * address matches, for IPv4; `::/0` or its halves for IPv6.
 */
export function familiesCoveredWhole(cidrs: readonly string[]): Array<'IPv4' | 'IPv6'> {
  const v4: Array<[bigint, bigint]> = [];
  const v6: Array<[bigint, bigint]> = [];
  for (const text of cidrs) {
    const cidr = parseCidr(text);
    if (!cidr) continue;
    const bits = cidr.family === 'ipv4' ? 32n : 128n;
    const size = 2n ** (bits - BigInt(cidr.prefix));
    const start = (addressValue(cidr.address) / size) * size;
    if (cidr.family === 'ipv4') {
      v4.push([start, start + size]);
      continue;
    }
    v6.push([start, start + size]);
    // Its part of ::ffff:0:0/96, as IPv4 addresses.
    const from = start > MAPPED_START ? start : MAPPED_START;
    const to = start + size < MAPPED_START + IPV4_SPACE ? start + size : MAPPED_START + IPV4_SPACE;
    if (from < to) v4.push([from - MAPPED_START, to - MAPPED_START]);
  }
  return [
    ...(coverWhole(v4, IPV4_SPACE) ? (['IPv4'] as const) : []),
    ...(coverWhole(v6, IPV6_SPACE) ? (['IPv6'] as const) : []),
  ];
}

/**
 * Where a list lets every address of a family in: `alone`, the indexes of the entries that do by themselves
 * (`0.0.0.0/0`, `::/80`); `together`, the family the other entries cover in pieces (`0.0.0.0/1` with
 * `128.0.0.0/1`), or null. For what refuses (an allow-list in prod, SVC_TRUST_PROXY) or drops such entries.
 */
export function everyAddressIn(cidrs: readonly string[]): {
  alone: number[];
  together: 'IPv4' | 'IPv6' | null;
} {
  const alone = cidrs.flatMap((c, i) => (familiesCoveredWhole([c]).length > 0 ? [i] : []));
  const rest = cidrs.filter((_, i) => !alone.includes(i));
  return { alone, together: familiesCoveredWhole(rest)[0] ?? null };
}

/**
 * A set of CIDRs to test addresses against, on node's built-in BlockList (maintained, exact for v4 and v6).
 * IPv4-mapped IPv6 peers ("::ffff:1.2.3.4") are matched as their IPv4 address.
 */
export class CidrSet {
  private readonly list = new BlockList();
  readonly size: number;

  constructor(cidrs: readonly string[]) {
    for (const cidr of cidrs) {
      const parsed = parseCidr(cidr);
      if (!parsed) throw new Error(`invalid CIDR: ${cidr}`);
      // BlockList refused a zone id on the longest form of an address, and the firewall's load threw, a 500 for
      // every request (review).
      this.list.addSubnet(withoutZone(parsed.address), parsed.prefix, parsed.family);
    }
    this.size = cidrs.length;
  }

  has(ip: string): boolean {
    // As the entries (a forwarded address may carry a zone id; BlockList did not match it on the longest form, review).
    const bare = withoutZone(ip);
    const address = bare.startsWith('::ffff:') && isIP(bare.slice(7)) === 4 ? bare.slice(7) : bare;
    const version = isIP(address);
    if (version === 0) return false;
    return this.list.check(address, version === 4 ? 'ipv4' : 'ipv6');
  }
}
