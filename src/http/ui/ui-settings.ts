import type { Secret } from '../../lib/secret.js';
import type { RedisTarget } from '../../redis/redis-server.js';

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
}
