import type { LookupAddress } from 'node:dns';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../../src/lib/secret.js';
import { WebhookSender, WebhookTargetRefusedError } from '../../../src/notify/sender.js';
import { parseWebhookAllowList, type ResolveAll, WebhookTargets } from '../../../src/notify/webhook-target.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';

/**
 * A webhook to a name that resolves inward (issue 30): the URL looks public when it comes in,
 * so the sender checks every address the name resolves to when it connects. The resolver is
 * given here, so that a name under the test's control answers with the receiver's loopback
 * address (or with it among public ones, as a rebinding name does); the daemon's is dns.lookup.
 */

let receiver: WebhookReceiver;
let sender: WebhookSender | undefined;

beforeEach(async () => {
  receiver = await startWebhookReceiver();
});

async function closeSender(): Promise<void> {
  await sender?.close();
  sender = undefined;
}

afterEach(async () => {
  await closeSender();
  await receiver.stop();
});

/** A resolver that answers `hooks.example.test` with these addresses and knows no other name. */
function resolverOf(addresses: string[]): ResolveAll {
  return (host, _options, callback) => {
    if (host !== 'hooks.example.test') {
      callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), []);
      return;
    }
    const answer: LookupAddress[] = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    queueMicrotask(() => callback(null, answer));
  };
}

function senderWith(addresses: string[], allow: string[] = []): WebhookSender {
  sender = new WebhookSender({
    secret: new Secret('resolve-test'),
    targets: new WebhookTargets(parseWebhookAllowList(allow)),
    resolve: resolverOf(addresses),
    timeoutMs: 2000,
  });
  return sender;
}

const delivery = () => ({
  id: 'd-1',
  event: 'job.finished' as const,
  url: `http://hooks.example.test:${new URL(receiver.url).port}/hook`,
  payload: { event: 'job.finished', id: 'd-1' } as never,
});

describe('a name that resolves inward', () => {
  it('is refused when connecting: nothing reaches the address, and the refusal is final', async () => {
    const error = await senderWith(['127.0.0.1'])
      .send(delivery())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebhookTargetRefusedError);
    const refused = error as WebhookTargetRefusedError;
    expect(refused.retryable).toBe(false);
    expect(refused.code).toBe('SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED');
    expect(refused.message).toContain('hooks.example.test resolves to 127.0.0.1, a loopback address');
    expect(refused.message).toContain('SCHEDFLOW_WEBHOOK_ALLOW_HOSTS');
    expect(receiver.calls).toEqual([]);
  });

  it('is refused when any one of its addresses is inward, not only the first (DNS rebinding)', async () => {
    for (const addresses of [
      ['203.0.113.7', '127.0.0.1'],
      ['2001:db8::7', '::ffff:127.0.0.1'],
      ['203.0.113.7', '169.254.169.254'],
    ]) {
      const error = await senderWith(addresses)
        .send(delivery())
        .catch((e: unknown) => e);
      expect(error, addresses.join(' ')).toBeInstanceOf(WebhookTargetRefusedError);
      await closeSender();
    }
    expect(receiver.calls).toEqual([]);
  });

  it('is connected to when the allow-list names it, or the network it resolves into', async () => {
    expect(await senderWith(['127.0.0.1'], ['hooks.example.test']).send(delivery())).toBe(200);
    await closeSender();
    expect(await senderWith(['127.0.0.1'], ['127.0.0.0/8']).send(delivery())).toBe(200);
    expect(receiver.calls).toHaveLength(2);
  });
});
