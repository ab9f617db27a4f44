import { SchedflowError } from '../errors.js';
import { backoffDelayMs } from '../lib/retry-policy.js';
import { sleep } from '../lib/sleep.js';
import type { Logger } from '../logger.js';
import { SchedClient } from './client.js';
import type { Profile } from './profile.js';
import { UpstreamHealth } from './upstream-health.js';

/** A profile whose scheduler has not answered yet: work for it waits and retries. */
export class ProfileNotConnectedError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED';
}

/**
 * One connected client per profile. A scheduler that is down at start does not
 * stop the daemon: its client keeps connecting in the background, and work for
 * that profile waits until then. A configuration error is fatal at start.
 */
export class ClientRegistry {
  private readonly clients = new Map<string, SchedClient>();
  private readonly abort = new AbortController();
  private readonly connecting: Promise<void>[] = [];
  /** One per profile, from the start: requests that fail before the first connection count too. */
  private readonly healthByProfile: ReadonlyMap<string, UpstreamHealth>;

  constructor(
    readonly profiles: ReadonlyMap<string, Profile>,
    private readonly logger: Logger,
  ) {
    this.healthByProfile = new Map([...profiles.keys()].map((name) => [name, new UpstreamHealth(name)]));
  }

  /** What the profile's upstream has been answering; undefined for an unknown profile. */
  health(profile: string): UpstreamHealth | undefined {
    return this.healthByProfile.get(profile);
  }

  /** Connects every profile; waits for the first attempt of each, keeps retrying failed ones. */
  async start(): Promise<void> {
    const first: Promise<void>[] = [];
    for (const profile of this.profiles.values()) {
      let settle: (fatal?: unknown) => void = () => {};
      first.push(new Promise((resolve, reject) => (settle = (fatal) => (fatal ? reject(fatal) : resolve()))));
      this.connecting.push(this.connect(profile, settle));
    }
    await Promise.all(first);
  }

  private async connect(profile: Profile, firstAttemptDone: (fatal?: unknown) => void): Promise<void> {
    for (let attempt = 0; !this.abort.signal.aborted; attempt++) {
      try {
        this.clients.set(
          profile.name,
          await SchedClient.connect(profile, {
            logger: this.logger,
            health: this.healthByProfile.get(profile.name),
          }),
        );
        firstAttemptDone();
        return;
      } catch (error) {
        // A configuration mistake (bad version, unreadable token) stops the start; an outage does not.
        if (!(error instanceof SchedflowError) || !error.retryable) {
          firstAttemptDone(error);
          return;
        }
        firstAttemptDone();
        const delay = backoffDelayMs(attempt, { baseDelayMs: 1000, maxDelayMs: 60_000 });
        this.logger.warn({ profile: profile.name, err: error, retryInMs: delay }, 'scheduler not reachable yet');
        await sleep(delay, this.abort.signal).catch(() => {});
      }
    }
  }

  get(profile: string): SchedClient {
    const client = this.clients.get(profile);
    if (client) return client;
    if (!this.profiles.has(profile)) {
      throw new ProfileNotConnectedError(
        `no scheduler profile "${profile}" (have: ${[...this.profiles.keys()].join(', ')})`,
      );
    }
    throw new ProfileNotConnectedError(`the scheduler of profile "${profile}" has not answered yet`);
  }

  connected(profile: string): boolean {
    return this.clients.has(profile);
  }

  async close(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.connecting);
    await Promise.all([...this.clients.values()].map((c) => c.close()));
  }
}
