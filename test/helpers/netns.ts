import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';

/**
 * Hosts as network namespaces on this machine: each has a network stack of its own (its own
 * loopback, ports and address), joined to the others by a veth pair on one bridge, as machines
 * on one switch. The bridge holds the network's first address, so the test itself is a host
 * on it too (the operator's machine): it reaches every host, and the hosts reach what the
 * test serves there. Addresses come from 10.231.0.0/16, a /24 per network, used only here.
 */

export interface TestHost {
  name: string;
  /** `ip netns exec <netns> …` runs a command on this host. */
  netns: string;
  address: string;
}

export interface TestNetwork {
  /** The test's own address on the network (the bridge's). */
  gateway: string;
  hosts: Record<string, TestHost>;
  /** Removes the namespaces and the bridge; what still runs in a namespace must be stopped first. */
  remove(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/**
 * Why hosts cannot be made on this machine (not root, no `ip`, namespaces or veth pairs refused
 * in a container), or null when they can: a network of one host is made, then removed.
 */
export function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'making network namespaces needs root (ip netns add)';
  try {
    makeNetwork(['probe']).remove();
    return null;
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim();
    return `a network namespace could not be made: ${stderr || (error as Error).message} (is iproute2 installed? bash test/setup.sh)`;
  }
}

/** Hosts `names` on a network of their own. */
export function makeNetwork(names: readonly string[]): TestNetwork {
  const id = randomBytes(3).toString('hex');
  // Interface names have at most 15 characters.
  const bridge = `sfbr${id}`;
  const subnet = `10.231.${freeThirdOctet()}`;
  const made: string[] = [];
  const remove = () => {
    for (const netns of made.splice(0)) execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
    try {
      ip('link', 'del', bridge);
    } catch {
      // not made
    }
  };
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${subnet}.1/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    const hosts: Record<string, TestHost> = {};
    names.forEach((name, i) => {
      const netns = `schedflow-${id}-${name}`;
      const veth = `sfv${id}${i}`;
      const address = `${subnet}.${10 + i}`;
      ip('netns', 'add', netns);
      made.push(netns);
      ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
      ip('link', 'set', veth, 'master', bridge, 'up');
      ip('-n', netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
      ip('-n', netns, 'link', 'set', 'eth0', 'up');
      ip('-n', netns, 'link', 'set', 'lo', 'up');
      hosts[name] = { name, netns, address };
    });
    return { gateway: `${subnet}.1`, hosts, remove };
  } catch (error) {
    remove();
    throw error;
  }
}

/**
 * A /24 of 10.231.0.0/16 no bridge of this machine has: networks of test files side by side
 * must not route each other's addresses.
 */
function freeThirdOctet(): number {
  const used = new Set(
    [...execFileSync('ip', ['-o', '-4', 'addr', 'show'], { encoding: 'utf8' }).matchAll(/inet 10\.231\.(\d+)\./g)].map(
      (m) => Number(m[1]),
    ),
  );
  const free = Array.from({ length: 256 }, (_, i) => i).filter((i) => !used.has(i));
  const pick = free[randomInt(0, free.length)];
  if (pick === undefined) throw new Error('no free /24 left in 10.231.0.0/16 for a test network');
  return pick;
}

/** `command args` as run on `host` (spawn's command and arguments). */
export function onHost(host: TestHost, command: string, args: readonly string[]): [string, string[]] {
  return ['ip', ['netns', 'exec', host.netns, command, ...args]];
}
