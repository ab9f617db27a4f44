import { type LookupAddress, type LookupAllOptions, type LookupOptions, lookup as systemLookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent. A webhook URL is chosen by whoever submits a job, and the
 * daemon POSTs to it from inside the network it runs in (as root, on the embedded default):
 * without a check, a token that may submit a job could reach the daemon's own host, the
 * cluster's private services and the cloud's metadata endpoint, and read their answers back
 * (issue 30). So a target is refused when it is inward (loopback, link-local, private,
 * unique-local, multicast, reserved, a metadata address or name) unless the operator names
 * its host in `SCHEDFLOW_WEBHOOK_ALLOW_HOSTS`. It is checked twice: when the URL is given
 * (the host as written, {@link WebhookTargets.refusal}) and when a connection is made (every
 * address its name resolves to, {@link WebhookTargets.lookup}), so a name that resolves
 * inward, or starts to after it was accepted (DNS rebinding), is caught too.
 */

/** The setting that lets inward hosts be webhook targets, named in every refusal. */
export const WEBHOOK_ALLOW_HOSTS_ENV = 'SCHEDFLOW_WEBHOOK_ALLOW_HOSTS';

type Range = readonly [kind: string, network: string, prefix: number];

// Metadata services first, so a refusal names them rather than the range they sit in.
const METADATA_ADDRESSES = [
  '169.254.169.254', // AWS, GCP, Azure, OpenStack, …
  '169.254.170.2', // AWS ECS task metadata
  '100.100.100.200', // Alibaba Cloud
  'fd00:ec2::254', // AWS over IPv6
];

const INWARD_V4: readonly Range[] = [
  // 0.0.0.0 connects to the host itself on Linux.
  ['unspecified', '0.0.0.0', 8],
  ['loopback', '127.0.0.0', 8],
  ['private', '10.0.0.0', 8],
  ['private', '172.16.0.0', 12],
  ['private', '192.168.0.0', 16],
  ['shared (carrier-grade NAT)', '100.64.0.0', 10],
  ['link-local', '169.254.0.0', 16],
  ['reserved (IETF protocol assignments)', '192.0.0.0', 24],
  ['reserved (benchmarking)', '198.18.0.0', 15],
  ['multicast', '224.0.0.0', 4],
  // Includes the broadcast address 255.255.255.255.
  ['reserved', '240.0.0.0', 4],
];

const INWARD_V6: readonly Range[] = [
  ['unspecified', '::', 128],
  ['loopback', '::1', 128],
  // Deprecated (RFC 4291 §2.5.5.1) and never a public receiver: ::127.0.0.1 and the like.
  ['IPv4-compatible', '::', 96],
  ['link-local', 'fe80::', 10],
  ['site-local', 'fec0::', 10],
  ['unique-local', 'fc00::', 7],
  ['multicast', 'ff00::', 8],
  // Stateless IPv4 translation (RFC 6145): a translator, where there is one, makes it IPv4.
  ['IPv4-translated', '::ffff:0:0:0', 96],
  ['local-use NAT64', '64:ff9b:1::', 48],
  ['discard-only', '100::', 64],
];

/**
 * The IPv6 forms an IPv4 address can take that still reach it: IPv4-mapped (::ffff:a.b.c.d,
 * which BlockList also matches against IPv4 rules, listed anyway so nothing rests on that),
 * NAT64 (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16, RFC 3056), with where the IPv4 address
 * sits in them.
 */
const V4_IN_V6: readonly { prefix: string; at: number }[] = [
  { prefix: '::ffff:0:0', at: 96 },
  { prefix: '64:ff9b::', at: 96 },
  { prefix: '2002::', at: 16 },
];

/** An IPv4 network inside one of the IPv6 forms above, as BlockList takes it. */
function v4InV6(form: { prefix: string; at: number }, network: string, prefix: number): [string, number] {
  const [a = 0, b = 0, c = 0, d = 0] = network.split('.').map(Number);
  const high = ((a << 8) | b).toString(16);
  const low = ((c << 8) | d).toString(16);
  // 6to4 puts the address right after 2002:, the others in the last 32 bits.
  const address = form.at === 16 ? `2002:${high}:${low}::` : `${form.prefix.replace(/0:0$/, '')}${high}:${low}`;
  return [address, form.at + prefix];
}

/** One BlockList per kind of inward address, so a refusal can say which kind it met. */
const INWARD: readonly { kind: string; list: BlockList }[] = (() => {
  const byKind = new Map<string, BlockList>();
  const listOf = (kind: string) => {
    const list = byKind.get(kind) ?? new BlockList();
    byKind.set(kind, list);
    return list;
  };
  for (const address of METADATA_ADDRESSES)
    listOf('cloud metadata').addAddress(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
  for (const [kind, network, prefix] of INWARD_V4) {
    listOf(kind).addSubnet(network, prefix, 'ipv4');
    for (const form of V4_IN_V6) listOf(kind).addSubnet(...v4InV6(form, network, prefix), 'ipv6');
  }
  for (const [kind, network, prefix] of INWARD_V6) listOf(kind).addSubnet(network, prefix, 'ipv6');
  return [...byKind].map(([kind, list]) => ({ kind, list }));
})();

/**
 * What kind of inward address `address` is (`loopback`, `private`, `cloud metadata`, …), or
 * null for a public one (or text that is not an IP address).
 */
export function inwardKindOf(address: string): string | null {
  const version = isIP(address);
  if (version === 0) return null;
  const type = version === 6 ? 'ipv6' : 'ipv4';
  return INWARD.find(({ list }) => list.check(address, type))?.kind ?? null;
}

/**
 * Names that only ever mean an inward host: loopback by definition (RFC 6761 §6.3), the
 * metadata services' names, the private-use top-level domains (`.internal`, ICANN 2024;
 * `.home.arpa`, RFC 8375) and multicast DNS (`.local`); and names without a dot, which only
 * the resolver's search domains complete, to the local network's hosts.
 */
function inwardName(name: string): string | null {
  if (name === 'localhost' || name.endsWith('.localhost') || name === 'localhost.localdomain') {
    return 'a loopback name';
  }
  if (['metadata', 'metadata.goog', 'metadata.google.internal', 'instance-data'].includes(name)) {
    return 'a cloud metadata name';
  }
  if (name.endsWith('.internal') || name.endsWith('.home.arpa') || name.endsWith('.local')) {
    return 'a private-use name';
  }
  if (!name.includes('.')) return 'a name without a dot (completed by the local search domains)';
  return null;
}

/** The host of a URL as compared and resolved: lower case, without IPv6 brackets or a final dot. */
function hostOf(url: URL): string {
  const host = url.hostname.toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) return host.slice(1, -1);
  return host.endsWith('.') ? host.slice(0, -1) : host;
}

/** The allow-list, as parsed from `SCHEDFLOW_WEBHOOK_ALLOW_HOSTS`. */
export interface WebhookAllowList {
  /** Host names (lower case, no final dot) allowed whatever they resolve to. */
  readonly names: readonly string[];
  /** Addresses and networks allowed, as written (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`). */
  readonly networks: readonly string[];
}

/**
 * Parses the allow-list's entries (`SCHEDFLOW_WEBHOOK_ALLOW_HOSTS`, split at commas): host
 * names, IP addresses and networks in CIDR notation. Names and addresses are read as a
 * URL's host is (so `LocalHost.` is `localhost`, and `2130706433` is 127.0.0.1). Throws an
 * Error naming the first entry that is none of these.
 */
export function parseWebhookAllowList(entries: readonly string[]): WebhookAllowList {
  const names: string[] = [];
  const networks: string[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    if (!entry) continue;
    const cidr = /^(.+)\/(\d{1,3})$/.exec(entry);
    if (cidr) {
      const [, network = '', bits = ''] = cidr;
      const version = isIP(network);
      if (version === 0 || Number(bits) > (version === 6 ? 128 : 32)) {
        throw new Error(`"${entry}" is not a network: give one as 10.0.0.0/8 or fd00::/8`);
      }
      networks.push(entry);
      continue;
    }
    let host: string;
    try {
      const url = new URL(`http://${isIP(entry) === 6 ? `[${entry}]` : entry}/`);
      if (url.port || url.pathname !== '/' || url.username || url.search) throw new Error('more than a host');
      host = hostOf(url);
    } catch {
      throw new Error(`"${entry}" is not a host name, an IP address or a network (no scheme, port or path)`);
    }
    if (isIP(host)) networks.push(host);
    else names.push(host);
  }
  return { names, networks };
}

/** Why a connection was not made: the name resolved to an inward address (checked in WebhookSender). */
export class InwardAddressError extends Error {
  readonly code = 'ESCHEDFLOW_INWARD';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly kind: string,
  ) {
    super(`${host} resolves to ${address}, ${article(kind)} ${kind} address`);
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** `dns.lookup` with every address asked for; tests pass their own to make a name resolve inward. */
export type ResolveAll = (
  host: string,
  options: LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * The webhook target policy of a daemon: built once from its allow-list, used at the door
 * (the local API) and by the sender.
 */
export class WebhookTargets {
  private readonly names: ReadonlySet<string>;
  private readonly networks = new BlockList();

  constructor(allow: WebhookAllowList = { names: [], networks: [] }) {
    this.names = new Set(allow.names);
    for (const entry of allow.networks) {
      const [address = '', bits] = entry.split('/');
      const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.networks.addAddress(address, type);
      else this.networks.addSubnet(address, Number(bits), type);
    }
  }

  /** The kind of inward address `address` is, unless the allow-list lets it be a target. */
  private refusedKind(address: string): string | null {
    const kind = inwardKindOf(address);
    if (kind === null) return null;
    return this.networks.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4') ? null : kind;
  }

  /**
   * Why a webhook URL may not be a target, as written (its host as an address, or a name that
   * only means an inward host), or null when it may. Names that resolve inward are caught
   * when connecting ({@link lookup}). Call it with a URL the caller already parsed as http(s).
   */
  refusal(url: URL): string | null {
    const host = hostOf(url);
    if (this.names.has(host)) return null;
    let what: string | null;
    if (isIP(host)) {
      const kind = this.refusedKind(host);
      what = kind && `${article(kind)} ${kind} address`;
    } else {
      what = inwardName(host);
    }
    if (what === null) return null;
    return `the host ${url.hostname} is ${what}: webhooks are not sent to the daemon's own host or network unless ${WEBHOOK_ALLOW_HOSTS_ENV} names the host`;
  }

  /**
   * A `lookup` for net.connect and tls.connect that resolves the name (all its addresses) and
   * fails with an InwardAddressError when any one of them is inward and not allowed: a name
   * that answers with one public and one private address could otherwise be connected to the
   * private one. A name the allow-list holds resolves as usual.
   */
  lookup(resolve: ResolveAll = systemLookup): (host: string, options: LookupOptions, callback: LookupCallback) => void {
    return (host, options, callback) => {
      const name = host.toLowerCase().replace(/\.$/, '');
      resolve(host, { ...options, all: true }, (error, addresses) => {
        if (error) return callback(error, []);
        if (!this.names.has(name)) {
          for (const { address } of addresses) {
            const kind = this.refusedKind(address);
            if (kind !== null) return callback(new InwardAddressError(host, address, kind), []);
          }
        }
        if (options.all) return callback(null, addresses);
        const first = addresses[0];
        if (!first) return callback(Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' }), []);
        callback(null, first.address, first.family);
      });
    };
  }
}

const article = (kind: string) => (/^[aeiou]/i.test(kind) ? 'an' : 'a');
