import { describe, expect, it } from 'vitest';
import {
  InwardAddressError,
  inwardKindOf,
  parseWebhookAllowList,
  WebhookTargets,
} from '../../src/notify/webhook-target.js';

/** What counts as an inward webhook target (issue 30), as addresses, URLs and resolved names. */

describe('inwardKindOf', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['2002:7f00:1::1', 'loopback'],
    ['::7f00:1', 'IPv4-compatible'],
    ['::ffff:0:7f00:1', 'IPv4-translated'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['10.20.30.40', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.254', 'private'],
    ['192.168.1.1', 'private'],
    ['::ffff:10.0.0.1', 'private'],
    ['100.64.0.1', 'shared (carrier-grade NAT)'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['169.254.169.254', 'cloud metadata'],
    ['::ffff:169.254.169.254', 'cloud metadata'],
    ['fd00:ec2::254', 'cloud metadata'],
    ['100.100.100.200', 'cloud metadata'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['224.0.0.251', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['198.18.0.1', 'reserved (benchmarking)'],
  ])('%s is %s', (address, kind) => {
    expect(inwardKindOf(address)).toBe(kind);
  });

  it.each(['8.8.8.8', '172.32.0.1', '100.128.0.1', '::ffff:8.8.8.8', '2606:4700:4700::1111', '203.0.113.7'])(
    '%s is public',
    (address) => {
      expect(inwardKindOf(address)).toBeNull();
    },
  );
});

describe('WebhookTargets.refusal', () => {
  const none = new WebhookTargets();
  const refusal = (url: string, targets = none) => targets.refusal(new URL(url));

  it('refuses the inward host in every way a URL can write it, naming the setting', () => {
    for (const url of [
      'http://2130706433/',
      'http://0x7f000001/',
      'http://0177.0.0.1/',
      'http://127.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://[0:0:0:0:0:0:0:1]/',
      'http://localhost/',
      'http://LocalHost./',
      'http://a.b.localhost/',
      'http://metadata.google.internal/',
      'http://metadata/',
      'http://printer.local/',
      'http://build.corp.internal/',
      'http://nas.home.arpa/',
      'http://jenkins:8080/',
    ]) {
      expect(refusal(url), url).toContain('SCHEDFLOW_WEBHOOK_ALLOW_HOSTS');
    }
  });

  it('takes public hosts', () => {
    for (const url of ['https://hooks.slack.com/services/x', 'http://8.8.8.8/', 'https://[2606:4700::1111]/']) {
      expect(refusal(url), url).toBeNull();
    }
  });

  it('takes what the allow-list names: a host name as written, an address in any spelling, a network', () => {
    const allowed = new WebhookTargets(parseWebhookAllowList(['Hooks.Lab.Internal.', '127.0.0.1', 'fd00::/8']));
    expect(refusal('http://hooks.lab.internal/', allowed)).toBeNull();
    expect(refusal('http://2130706433/', allowed)).toBeNull();
    expect(refusal('http://[::ffff:127.0.0.1]/', allowed)).toBeNull();
    expect(refusal('http://[fd00:ec2::254]/', allowed)).toBeNull();
    expect(refusal('http://127.0.0.2/', allowed)).not.toBeNull();
    expect(refusal('http://other.lab.internal/', allowed)).not.toBeNull();
  });
});

describe('parseWebhookAllowList', () => {
  it('reads names, addresses and networks', () => {
    expect(parseWebhookAllowList([' hooks.lab ', '10.0.0.0/8', '::1', '2130706433', ''])).toEqual({
      names: ['hooks.lab'],
      networks: ['10.0.0.0/8', '::1', '127.0.0.1'],
    });
  });

  it.each(['http://hooks.lab', 'hooks.lab:8080', 'hooks.lab/x', '10.0.0.0/33', 'fd00::/129', 'not a host'])(
    'refuses %s, naming it',
    (entry) => {
      expect(() => parseWebhookAllowList([entry])).toThrow(entry);
    },
  );
});

describe('WebhookTargets.lookup', () => {
  const lookup = (targets: WebhookTargets, host: string) =>
    new Promise<{ error: Error | null; address: unknown }>((resolve) =>
      targets.lookup()(host, { all: true }, (error, address) => resolve({ error, address })),
    );

  it('refuses a name the system resolver resolves inward (localhost, from /etc/hosts)', async () => {
    const { error } = await lookup(new WebhookTargets(), 'localhost');
    expect(error).toBeInstanceOf(InwardAddressError);
    expect(error?.message).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address$/);
  });

  it('resolves as usual a name the allow-list holds', async () => {
    const { error, address } = await lookup(new WebhookTargets(parseWebhookAllowList(['localhost'])), 'localhost');
    expect(error).toBeNull();
    expect(address).toEqual(expect.arrayContaining([expect.objectContaining({ address: expect.any(String) })]));
  });
});
