import { BlockList, isIP } from 'node:net';

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

const IPV4_MAPPED = new BlockList();
IPV4_MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6');

/**
 * Whether a CIDR takes in every address of a family: `/0`, or an IPv4-mapped IPv6 range of `/96`
 * (`::ffff:0.0.0.0/96`), which proxy-addr, like this module, reads as every IPv4 address.
 */
export function coversEveryAddress(cidr: {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}): boolean {
  if (cidr.prefix === 0) return true;
  return cidr.family === 'ipv6' && cidr.prefix === 96 && IPV4_MAPPED.check(cidr.address, 'ipv6');
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
      this.list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
    this.size = cidrs.length;
  }

  has(ip: string): boolean {
    const address = ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
    const version = isIP(address);
    if (version === 0) return false;
    return this.list.check(address, version === 4 ? 'ipv4' : 'ipv6');
  }
}
