import type { OidcSettings } from '../../config/oidc-settings.js';
import type { Secret } from '../../lib/secret.js';
import type { RedisTarget } from '../../redis/redis-server.js';
import type { LiveStreamOptions } from './live-streams.js';

/** The admin web UI's own settings (the rest comes from the local API's deps). */
export interface UiSettings {
  /** SCHEDFLOW_UI_PASSWORD or `<dataDir>/ui-password`: logs in with admin rights; null: tokens only. */
  password: Secret | null;
  /** Output files inside these folders (schedflow's data and configuration) are never shown. */
  protectedDirs: string[];
  /** Bytes of a job's output shown at the end of its page. @defaultValue 8 KiB */
  outputTailBytes?: number;
  /** Where the sessions are kept: the deployment's Redis, under its queue prefix (src/redis/ui-sessions.ts). */
  sessions: { redis: RedisTarget; prefix: string };
  /** Bounds of the live feed's streams (src/http/ui/live-streams.ts). */
  liveStreams?: LiveStreamOptions;
  /**
   * Single sign-on with an OpenID Connect provider (docs/sso.md), with the client secret read
   * from its file (null: a public client); absent: token and password logins only.
   */
  oidc?: OidcSettings & { clientSecret: Secret | null };
  /** Bounds of failed logins (src/http/ui/ui-plugin.ts). */
  loginFailures?: LoginFailureBounds;
}

/**
 * Failed logins counted before more are refused (429 with Retry-After), in a window that starts
 * with the first failure. Only failures count: viewing the login page, or logging in, never does.
 */
export interface LoginFailureBounds {
  /** Failed logins (a wrong token or password) from one address. @defaultValue 10 */
  perAddress: number;
  /** Failed UI password logins from every address together. @defaultValue 50 */
  perPassword: number;
  /** @defaultValue 5 minutes */
  windowMs: number;
}
