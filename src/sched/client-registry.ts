import { SchedflowError } from '../errors.js';
import { backoffDelayMs } from '../lib/retry-policy.js';
import { sleep } from '../lib/sleep.js';
import type { Logger } from '../logger.js';
import { SchedClient } from './client.js';
import type { Profile } from './profile.js';
import { declaredReport, notApplicable, SCOPES, type ScopeReport, scopeReport, scopesApply } from './scope-check.js';
import { UpstreamHealth } from './upstream-health.js';

/** How often scopes the proxy's answers left unknown are asked again. */
const SCOPE_RECHECK_MS = 60_000;

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
  /** What each profile's token may do, learnt once it connects (src/sched/scope-check.ts). */
  private readonly scopeReports = new Map<string, ScopeReport>();
  private readonly rechecking = new Set<string>();

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
        const client = await SchedClient.connect(profile, {
          logger: this.logger,
          health: this.healthByProfile.get(profile.name),
        });
        this.clients.set(profile.name, client);
        // Before the start is reported: the banner says what the token may not do.
        await this.checkScopes(profile, client);
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

  /**
   * What the profile's token may do: undefined until it has connected. A report that could not
   * tell a scope (the proxy did not answer) is learnt again in the background, at most once a
   * minute, each time it is asked for.
   */
  scopes(profile: string): ScopeReport | undefined {
    const report = this.scopeReports.get(profile);
    const client = this.clients.get(profile);
    if (
      report?.source === 'probe' &&
      client &&
      SCOPES.some((s) => report.scopes[s] === 'unknown') &&
      Date.now() - report.checkedAt > SCOPE_RECHECK_MS &&
      !this.rechecking.has(profile)
    ) {
      this.rechecking.add(profile);
      void this.checkScopes(client.profile, client).finally(() => this.rechecking.delete(profile));
    }
    return report;
  }

  private async checkScopes(profile: Profile, client: SchedClient): Promise<void> {
    let report: ScopeReport;
    if (!scopesApply(profile)) report = notApplicable(profile);
    else if (profile.scopes) report = declaredReport(profile.scopes);
    else {
      report = await client
        .probeScopes()
        .catch(() => scopeReport('probe', Object.fromEntries(SCOPES.map((s) => [s, 'unknown' as const]))));
    }
    this.scopeReports.set(profile.name, report);
    if (report.missing.length > 0) this.logger.warn({ profile: profile.name, missing: report.missing }, report.detail);
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
