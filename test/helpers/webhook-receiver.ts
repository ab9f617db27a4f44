import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from './http.js';

/** One request the receiver got, as it got it. */
export interface ReceivedCall {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, byte for byte (signatures are over these bytes). */
  body: string;
  /** What the receiver answered. */
  status: number;
  /** When it arrived (ms). */
  at: number;
}

export interface ScriptedAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering (to run into the sender's time limit). */
  delayMs?: number;
}

export interface WebhookReceiver {
  /** Base URL, `http://127.0.0.1:<port>`; any path is accepted. */
  url: string;
  calls: ReceivedCall[];
  /** The next calls get these answers, in order; after them, 200. */
  answer(...answers: (number | ScriptedAnswer)[]): void;
  waitForCalls(count: number, timeoutMs?: number): Promise<ReceivedCall[]>;
  stop(): Promise<void>;
}

/** A webhook receiver on a free loopback port that records raw bodies and headers. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const calls: ReceivedCall[] = [];
  const script: ScriptedAnswer[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = script.shift() ?? { status: 200 };
      calls.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        status: answer.status,
        at: Date.now(),
      });
      const send = () => {
        timers.delete(timer);
        if (res.destroyed) return;
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
        res.end(answer.body ?? (answer.status < 300 ? 'ok' : `status ${answer.status}`));
      };
      const timer = setTimeout(send, answer.delayMs ?? 0);
      timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    answer: (...answers) => {
      script.push(...answers.map((a) => (typeof a === 'number' ? { status: a } : a)));
    },
    waitForCalls: (count, timeoutMs = 15_000) =>
      waitFor(async () => (calls.length >= count ? calls.slice() : undefined), {
        what: `${count} webhook call(s)`,
        timeoutMs,
        intervalMs: 50,
      }),
    stop: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
