import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** When it arrived (Date.now()). */
  atMs: number;
  /** The upstream's status, once it answered. */
  status?: number;
}

export interface FlakyProxy {
  url: string;
  requests: RecordedRequest[];
  /** Forward the next matching request, then drop the connection instead of answering. */
  dropAnswerOnce(match: (req: RecordedRequest) => boolean): void;
  /** Forward the next matching request, then hold the answer until `release()` (a crash window). */
  holdAnswerOnce(match: (req: RecordedRequest) => boolean): Promise<void>;
  release(): void;
  /** Answer the next matching request with this, without asking the upstream (a 429 or 503 of a proxy). */
  answerOnce(
    match: (req: RecordedRequest) => boolean,
    answer: { status: number; headers?: Record<string, string>; body: string },
  ): void;
  /** Accept requests and never answer (for timeouts). */
  hang: boolean;
  /** Answers 404 without asking the upstream, as plain slurmrestd does for paths it lacks (`/meta/...`). */
  notFound: ((req: RecordedRequest) => boolean) | undefined;
  /** Rewrites answers (e.g. an accounting that has no record yet); undefined passes them through. */
  rewrite: ((req: RecordedRequest, body: string) => string) | undefined;
  /** Answer in chunks of this many bytes, without a length (as a server streaming its answer). */
  chunkBytes: number | undefined;
  close(): Promise<void>;
}

/**
 * A loopback HTTP proxy in front of a test upstream that records what the
 * client sent and can lose an answer after the upstream acted on the request:
 * the crash-between-accept-and-record case that idempotent submission handles.
 */
/** `address`: where it listens (a test network's gateway, for hosts to reach it). */
export async function startFlakyProxy(target: string, address = '127.0.0.1'): Promise<FlakyProxy> {
  const drops: ((req: RecordedRequest) => boolean)[] = [];
  const answers: {
    match: (req: RecordedRequest) => boolean;
    answer: { status: number; headers?: Record<string, string>; body: string };
  }[] = [];
  const holds: { match: (req: RecordedRequest) => boolean; reached: () => void }[] = [];
  let released: () => void = () => {};
  const releasedPromise = new Promise<void>((resolve) => {
    released = resolve;
  });
  const proxy: FlakyProxy = {
    url: '',
    requests: [],
    hang: false,
    notFound: undefined,
    rewrite: undefined,
    chunkBytes: undefined,
    dropAnswerOnce(match) {
      drops.push(match);
    },
    holdAnswerOnce(match) {
      return new Promise((reached) => holds.push({ match, reached }));
    },
    release: () => released(),
    answerOnce(match, answer) {
      answers.push({ match, answer });
    },
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const recorded: RecordedRequest = {
        method: req.method ?? 'GET',
        url: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        atMs: Date.now(),
      };
      proxy.requests.push(recorded);
      if (proxy.hang) return;
      if (proxy.notFound?.(recorded)) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
        return;
      }
      const answerIndex = answers.findIndex((a) => a.match(recorded));
      if (answerIndex >= 0) {
        const [{ answer }] = answers.splice(answerIndex, 1) as [(typeof answers)[number]];
        recorded.status = answer.status;
        res.writeHead(answer.status, answer.headers).end(answer.body);
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (typeof v === 'string' && !['host', 'connection', 'content-length'].includes(k)) headers[k] = v;
      }
      const upstream = await fetch(`${target}${recorded.url}`, {
        method: recorded.method,
        headers,
        body: recorded.method === 'GET' || recorded.method === 'DELETE' ? undefined : recorded.body,
      });
      recorded.status = upstream.status;
      const original = await upstream.text();
      const text = proxy.rewrite ? proxy.rewrite(recorded, original) : original;
      const holdIndex = holds.findIndex((h) => h.match(recorded));
      if (holdIndex >= 0) {
        const [hold] = holds.splice(holdIndex, 1);
        hold?.reached();
        await releasedPromise;
      }
      const dropIndex = drops.findIndex((match) => match(recorded));
      if (dropIndex >= 0) {
        drops.splice(dropIndex, 1);
        req.socket.destroy();
        return;
      }
      const out: Record<string, string> = {};
      upstream.headers.forEach((value, key) => {
        if (!['content-length', 'connection', 'keep-alive', 'transfer-encoding'].includes(key)) out[key] = value;
      });
      res.writeHead(upstream.status, out);
      const step = proxy.chunkBytes;
      if (step === undefined) {
        res.end(text);
        return;
      }
      const bytes = Buffer.from(text);
      for (let at = 0; at < bytes.length; at += step) res.write(bytes.subarray(at, at + step));
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  proxy.url = `http://${address}:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
