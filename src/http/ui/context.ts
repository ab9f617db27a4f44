import type { FastifyReply, FastifyRequest } from 'fastify';
import type { UiSessions } from '../../redis/ui-sessions.js';
import type { ApiDeps } from '../deps.js';
import type { LiveChanges } from './live-changes.js';
import type { UiSession } from './sessions.js';
import type { UiSettings } from './ui-settings.js';

export type { UiSettings };

export interface UiContext {
  deps: ApiDeps;
  settings: UiSettings;
  sessions: UiSessions;
  live: LiveChanges;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The UI session of a request under /ui (null on the login page and assets). */
    uiSession: UiSession | null;
  }
}

/** The session of a request the UI's guard let through (every page but login). */
export function sessionOf(request: FastifyRequest): UiSession {
  const session = request.uiSession;
  if (!session) throw new Error('no UI session on a guarded route');
  return session;
}

export function sendPage(reply: FastifyReply, text: string, status = 200): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(text);
}

/** The text of a form field (urlencoded bodies are parsed into one value per name). */
export function field(body: unknown, name: string): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

export function queryField(request: FastifyRequest, name: string): string | undefined {
  const value = (request.query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}
