import { mayChange } from '../../access/principal.js';
import { grants } from '../../access/visibility.js';
import type { ApiScope } from '../../db/schema.js';
import { principalOfLogin, type UiSession } from './sessions.js';

/**
 * The UI's rules are the API's, per logged-in user (src/access/visibility.ts): an action on a
 * request, run or pipeline needs the scope the API's route would need, and the thing its
 * owner's (or an admin).
 */

/** Whether the session holds the scope an action needs (`admin` holds all; `audit` only reads). */
export const mayUiAct = (session: UiSession, scope: ApiScope): boolean => grants(session.scopes, scope);

/** Whether the session may take an action needing `scope` on what `owner` owns. */
export const mayUiChange = (session: UiSession, scope: ApiScope, owner: string): boolean =>
  mayUiAct(session, scope) && mayChange(principalOfLogin(session), owner);

/** The 403 text of an action the session's scopes do not grant. */
export const lacksScope = (scope: ApiScope, what: string): string => `the "${scope}" scope is needed to ${what}`;
