import type { ApiScope } from '../db/schema.js';

/**
 * Who acts on the shared daemon, and for whom: every request, run and audit row carries an
 * owner (whose it is) and an actor (who made it). A lab service's token, a person logged in to
 * the web UI, the CLI on the daemon's host and a pipeline's schedule are principals alike, so
 * one rule (src/access/visibility.ts, filtering the queries) decides what each may see and change.
 */
export interface Principal {
  /** The owner whose requests and runs it makes, and (without `admin` or `audit`) the only one it sees. */
  readonly owner: string;
  /** Who it is, as the history and the audit log record it: see the `*Actor` functions below. */
  readonly actor: string;
  readonly scopes: readonly ApiScope[];
}

/** The owner of what was recorded before owners existed, of tokens made then, and of pipelines that name none. */
export const DEFAULT_OWNER = 'default';

/** The daemon itself: a retry its policy makes, a run's steps, a lost job run again. */
export const DAEMON_ACTOR = 'schedflow';

/** Owner names: as token names, so an owner can be named on a command line and in a URL as is. */
export const OWNER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const tokenActor = (name: string): string => `token:${name}`;
export const uiActor = (user: string): string => `ui:${user}`;
export const cliActor = (unixUser: string): string => `cli:${unixUser}`;
export const scheduleActor = (pipeline: string): string => `schedule:${pipeline}`;
/** A run started by the end of a run of `pipeline` (the downstream pipeline's `on:`). */
export const upstreamActor = (pipeline: string): string => `upstream:${pipeline}`;

/** Whether `scopes` grant `scope`: `admin` holds every scope. */
export function hasScope(scopes: readonly ApiScope[], scope: ApiScope): boolean {
  return scopes.includes(scope) || scopes.includes('admin');
}

/** Whether it reads every owner's requests and runs: admins, and auditors (who change nothing). */
export function seesEveryOwner(p: Principal): boolean {
  return hasScope(p.scopes, 'admin') || p.scopes.includes('audit');
}

/** Whether it may change (cancel, resubmit, retry, …) what `owner` owns: its own, or anyone's for an admin. */
export function mayChange(p: Principal, owner: string): boolean {
  return hasScope(p.scopes, 'admin') || p.owner === owner;
}
