import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Principal } from '../../access/principal.js';
import { grants, type OwnedPipeline, readsOwned, runAccess } from '../../access/visibility.js';
import type { History } from '../../db/history.js';
import type { RunAccess } from '../../db/runs.js';
import type { ApiScope } from '../../db/schema.js';
import { liveTokenGrant } from '../../db/tokens.js';
import type { Logger } from '../../logger.js';
import type { StreamCheck, UiSessions } from '../../redis/ui-sessions.js';
import type { LiveChanges, OwnedChange } from './live-changes.js';
import { principalOfLogin, type UiSession } from './sessions.js';

export interface LiveStreamOptions {
  /** Live-feed streams one session may hold open at once, across the deployment. @defaultValue 6 */
  maxPerSession?: number;
  /** How often every open stream's session and token are looked at again. @defaultValue 2 s */
  checkEveryMs?: number;
}

/** One open `/ui/events` stream. */
interface Stream {
  id: string;
  res: ServerResponse;
  /** Its session's stored id (never the cookie's id). */
  sessionKey: string;
  tokenId: string | null;
  /** For whom it streams: its login's owner and scopes, as its token's are at the last check. */
  principal: Principal;
  /** The runs (and so the steps) it may read, as for its pages (runAccess); undefined: every owner's. */
  access: RunAccess | undefined;
  unsubscribe: () => void;
  keepAlive: NodeJS.Timeout;
}

/** Proxies drop idle connections: a comment this often keeps a quiet stream open. */
const KEEP_ALIVE_MS = 25_000;

/**
 * The UI's open live-feed streams (Server-Sent Events of LiveChanges). A stream lives no longer
 * than its session and its token: every `checkEveryMs` each one's session is looked up in Redis
 * (logged out, ended, idle or past its age ends it) and each of their tokens is read from the
 * history (revoked, or without `read` now, ends it and the token's sessions; its owner and scopes
 * now are what the stream filters by from then on).
 * A token revoked by `schedflow tokens revoke` writes nothing a web process hears of, so it is
 * looked for, not waited for. A session holds at most `maxPerSession` streams at once (counted in
 * Redis, for every web process): one more is refused with 429 and Retry-After, which an
 * EventSource takes as final rather than retrying, and the streams already open go on.
 *
 * Each stream is sent only the changes its session may read, by the rule its pages' queries
 * apply (src/access/visibility.ts): its owner's requests and runs, and the runs (and their steps)
 * of the pipelines whose `allow:` names its owner; admins and auditors every owner's.
 */
export class LiveStreams {
  readonly #streams = new Map<string, Stream>();
  readonly #maxPerSession: number;
  readonly #checkEveryMs: number;
  #timer: NodeJS.Timeout | undefined;
  #checking = false;

  constructor(
    private readonly deps: {
      sessions: UiSessions;
      store: History;
      live: LiveChanges;
      logger: Logger;
      /** The pipelines as loaded now, whose `allow:` lets other owners read their runs: asked at each check. */
      pipelines: () => Promise<readonly OwnedPipeline[]>;
    },
    options: LiveStreamOptions = {},
  ) {
    this.#maxPerSession = options.maxPerSession ?? 6;
    this.#checkEveryMs = options.checkEveryMs ?? 2000;
  }

  /** A stream is taken for gone (its process died) when not renewed for this long. */
  get #staleMs(): number {
    return this.#checkEveryMs * 3;
  }

  /**
   * Opens a stream on `res` for a session the guard let through, or answers 429 when the session
   * has its most streams open, or 303 to the login page when it has just ended.
   */
  async open(session: UiSession, res: ServerResponse): Promise<void> {
    const id = randomUUID();
    const principal = principalOfLogin(session);
    let check: StreamCheck;
    let access: RunAccess | undefined;
    try {
      access = runAccess(principal, await this.deps.pipelines(), 'read');
      check = await this.deps.sessions.checkStream(session.sessionKey, id, {
        open: true,
        most: this.#maxPerSession,
        staleMs: this.#staleMs,
      });
    } catch (error) {
      // Redis away: the stream cannot be counted, so it is not opened; the page's EventSource
      // tries again after Retry-After. (Or the pipelines could not be listed: the same.)
      this.deps.logger.warn({ err: error }, 'UI live updates: a stream could not be counted');
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' });
      res.end('the live feed is unavailable for a moment (Redis did not answer)\n');
      return;
    }
    if (check !== 'counted') {
      const refused = check === 'refused';
      const retryAfterSec = Math.ceil(this.#staleMs / 1000);
      res.writeHead(refused ? 429 : 401, {
        'content-type': 'text/plain; charset=utf-8',
        'cache-control': 'no-store',
        ...(refused && { 'retry-after': String(retryAfterSec) }),
      });
      res.end(
        refused
          ? `this session already has ${this.#maxPerSession} live pages open; close one, or reload this page in ${retryAfterSec} s\n`
          : 'this session has ended: log in again\n',
      );
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 3000\n\n');
    const stream: Stream = {
      id,
      res,
      sessionKey: session.sessionKey,
      tokenId: session.tokenId,
      principal,
      access,
      unsubscribe: this.deps.live.subscribe((changes) => this.#send(stream, changes)),
      keepAlive: setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS),
    };
    this.#streams.set(id, stream);
    res.on('close', () => this.#forget(stream));
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.#check(), this.#checkEveryMs);
      this.#timer.unref();
    }
  }

  /**
   * Writes the changes the stream's session may read, by the rule of its pages' queries (the
   * owner's, and the runs and steps of pipelines that allow it; admins and auditors all): another
   * owner's request or run is never named to it, not even by id.
   */
  #send(stream: Stream, changes: readonly OwnedChange[]): void {
    const visible = changes.filter((c) => readsOwned(stream.access, c.owner, c.pipeline)).map((c) => c.change);
    if (visible.length > 0) stream.res.write(`event: change\ndata: ${JSON.stringify(visible)}\n\n`);
  }

  /** Ends every stream (the server is closing): the pages reconnect to another process or later. */
  close(): void {
    for (const stream of [...this.#streams.values()]) stream.res.end();
    this.#stopTimer();
  }

  #forget(stream: Stream): void {
    if (!this.#streams.delete(stream.id)) return;
    clearInterval(stream.keepAlive);
    stream.unsubscribe();
    this.deps.sessions.endStream(stream.sessionKey, stream.id).catch(() => {
      // Redis away: the stream drops out of its session's count once it is not renewed.
    });
    if (this.#streams.size === 0) this.#stopTimer();
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Ends `stream` with an event saying why, so the page stops rather than reconnects. */
  #end(stream: Stream, why: string): void {
    stream.res.write(`event: ended\ndata: ${JSON.stringify({ reason: why })}\n\n`);
    stream.res.end();
    this.#forget(stream);
  }

  async #check(): Promise<void> {
    // A check slower than the interval (Redis or the history slow): the next waits for it.
    if (this.#checking) return;
    this.#checking = true;
    try {
      const streams = [...this.#streams.values()];
      const tokenIds = [...new Set(streams.flatMap((s) => (s.tokenId === null ? [] : [s.tokenId])))];
      const [grantList, pipelines, sessions] = await Promise.all([
        Promise.all(tokenIds.map((tokenId) => liveTokenGrant(this.deps.store, tokenId))),
        this.deps.pipelines(),
        Promise.all(
          streams.map((s) =>
            this.deps.sessions.checkStream(s.sessionKey, s.id, {
              open: false,
              most: this.#maxPerSession,
              staleMs: this.#staleMs,
            }),
          ),
        ),
      ]);
      const granted = new Map<string, { owner: string; scopes: ApiScope[] }>();
      tokenIds.forEach((tokenId, i) => {
        const grant = grantList[i];
        if (grant) granted.set(tokenId, grant);
      });
      const ended = new Set<string>();
      for (const tokenId of tokenIds) {
        const now = granted.get(tokenId);
        if (now && grants(now.scopes, 'read')) continue;
        ended.add(tokenId);
        // Its sessions end with it, as its next page request would find (ui-plugin.ts).
        await this.deps.sessions.destroyOfToken(tokenId);
      }
      streams.forEach((stream, i) => {
        if (stream.tokenId !== null && ended.has(stream.tokenId)) this.#end(stream, 'token revoked or without read');
        else if (sessions[i] === 'session-gone') this.#end(stream, 'session ended');
        else {
          // The token's owner and scopes as they are now (`tokens update`), and the pipelines'
          // `allow:` as loaded now, as the session's next page would see them.
          const now = stream.tokenId === null ? undefined : granted.get(stream.tokenId);
          if (now) stream.principal = { ...stream.principal, owner: now.owner, scopes: now.scopes };
          stream.access = runAccess(stream.principal, pipelines, 'read');
        }
      });
    } catch (error) {
      // Redis or the history away: the streams go on until a check can tell.
      this.deps.logger.warn({ err: error }, 'UI live updates: checking the open streams failed');
    } finally {
      this.#checking = false;
    }
  }
}
