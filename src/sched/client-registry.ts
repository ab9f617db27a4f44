import { ConfigError, SchedflowError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { backoffDelayMs } from '../lib/retry-policy.js';
import type { Logger } from '../logger.js';
import { type AccountReport, accountsApply, accountsUnknown, associationsReport } from './account-check.js';
import { SchedClient } from './client.js';
import { slurmUserOf } from './credentials.js';
import type { Profile } from './profile.js';
import { type ProfileProblem, problemOf } from './profile-check.js';
import type { Budget } from './request-budget.js';
import { declaredReport, notApplicable, SCOPES, type ScopeReport, scopeReport, scopesApply } from './scope-check.js';
import { UpstreamHealth } from './upstream-health.js';

/** Known associations are read again every this many re-checks: one added with `sacctmgr` is seen then. */
const ACCOUNTS_REFRESH_RECHECKS = 5;

/**
 * How a profile's last check went (src/sched/profile-check.ts): what the banner, /readyz, the
 * Profiles page and the door say of it.
 */
export interface ProfileStatus {
  /** Why the profile cannot work now, in one sentence with the fix; null once it has connected. */
  problem: ProfileProblem | null;
  /** When the last check ended (ms). */
  checkedAt: number;
}

/** How long a profile whose check failed waits at most before it is checked again. @defaultValue 10 s */
export const FAILED_CHECK_RETRY_MS = 10_000;

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
  /** Which accounts each profile's user may charge, on plain slurmrestd (src/sched/account-check.ts). */
  private readonly accountReports = new Map<string, AccountReport>();
  private readonly rechecking = new Set<string>();
  private readonly reportListeners: ((profile: string) => void)[] = [];
  private readonly connectedListeners: ((profile: string) => void)[] = [];
  /** Each profile's last check; absent before its first one has ended. */
  private readonly statusByProfile = new Map<string, ProfileStatus>();
  private recheckTimer: NodeJS.Timeout | undefined;
  /** The deployment's request budget of each profile, when the daemon shares them (Redis). */
  private readonly budgetByProfile: ReadonlyMap<string, Budget>;

  /**
   * @param recheckMs how often scopes the proxy's answers left unknown, and accounts left
   * unknown, are asked again. @defaultValue 60 s
   * @param budgetFor the request budget each profile's client takes from, shared with the
   * deployment's other processes; without it each client keeps one of its own.
   * @param failedCheckRetryMs how long a profile whose check failed waits at most before the next
   * one: work waiting for it goes this soon after it is fixed. @defaultValue 10 s
   */
  constructor(
    readonly profiles: ReadonlyMap<string, Profile>,
    private readonly logger: Logger,
    private readonly recheckMs = 60_000,
    budgetFor?: (profile: Profile) => Budget,
    private readonly failedCheckRetryMs = FAILED_CHECK_RETRY_MS,
    /** The daemon's clock, passed on to every client (their budgets, retries and checks). */
    private readonly clock: Clock = systemClock,
  ) {
    this.healthByProfile = new Map([...profiles.keys()].map((name) => [name, new UpstreamHealth(name)]));
    this.budgetByProfile = new Map(
      budgetFor ? [...profiles.values()].map((profile) => [profile.name, budgetFor(profile)]) : [],
    );
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
    // What is unknown is learnt without anyone asking, so the door catches up.
    this.recheckTimer = setInterval(() => {
      for (const name of this.clients.keys()) this.recheck(name);
    }, this.recheckMs);
    this.recheckTimer.unref();
  }

  /** Called with the profile's name each time its check, scope or account report is learnt again. */
  onReport(listener: (profile: string) => void): void {
    this.reportListeners.push(listener);
  }

  /** Called with the profile's name when it connects: at start, or once it is fixed or back. */
  onConnected(listener: (profile: string) => void): void {
    this.connectedListeners.push(listener);
  }

  /** How the profile's last check went; undefined before the first one has ended. */
  status(profile: string): ProfileStatus | undefined {
    return this.statusByProfile.get(profile);
  }

  /** Why the profile cannot work now (its last check failed), or null. */
  problem(profile: string): ProfileProblem | null {
    return this.statusByProfile.get(profile)?.problem ?? null;
  }

  private async connect(profile: Profile, firstAttemptDone: (fatal?: unknown) => void): Promise<void> {
    for (let attempt = 0; !this.abort.signal.aborted; attempt++) {
      try {
        const client = await SchedClient.connect(profile, {
          logger: this.logger,
          health: this.healthByProfile.get(profile.name),
          budget: this.budgetByProfile.get(profile.name),
          clock: this.clock,
        });
        this.clients.set(profile.name, client);
        // Before the start is reported: the banner says what the token may not do.
        await Promise.all([this.checkScopes(profile, client), this.checkAccounts(profile, client)]);
        this.statusByProfile.set(profile.name, { problem: null, checkedAt: this.clock.now() });
        this.reported(profile.name);
        this.notify(this.connectedListeners, profile.name);
        firstAttemptDone();
        return;
      } catch (error) {
        // A mistake in the profile file itself (a token file that cannot be read) stops the start,
        // as a bug would; what the scheduler answered is said (banner, /readyz, the door) and asked
        // again, so a token renewed, or a scheduler started, is taken without a restart.
        if (error instanceof ConfigError || !(error instanceof SchedflowError)) {
          firstAttemptDone(error);
          return;
        }
        const problem = problemOf(profile, error);
        const before = this.statusByProfile.get(profile.name)?.problem?.sentence;
        this.statusByProfile.set(profile.name, { problem, checkedAt: this.clock.now() });
        if (problem.sentence !== before) this.reported(profile.name);
        firstAttemptDone();
        const delay = backoffDelayMs(attempt, { baseDelayMs: 1000, maxDelayMs: this.failedCheckRetryMs });
        this.logger.warn(
          { profile: profile.name, problem: problem.kind, code: error.code, retryInMs: delay },
          problem.sentence,
        );
        await this.clock.sleep(delay, this.abort.signal).catch(() => {});
      }
    }
  }

  /**
   * What the profile's token may do: undefined until it has connected. A report that could not
   * tell a scope (the proxy did not answer) is learnt again in the background, at most once a
   * `recheckMs`, each time it is asked for (and by the timer of start()).
   */
  scopes(profile: string): ScopeReport | undefined {
    this.recheck(profile);
    return this.scopeReports.get(profile);
  }

  /**
   * Which accounts the profile's user may charge: undefined where it does not apply (the proxy)
   * or before the first connection. Unknown ones are read again as scopes are, known ones every
   * fifth time.
   */
  accounts(profile: string): AccountReport | undefined {
    this.recheck(profile);
    return this.accountReports.get(profile);
  }

  private recheck(profile: string): void {
    const client = this.clients.get(profile);
    if (!client || this.rechecking.has(profile)) return;
    const now = this.clock.now();
    const scopes = this.scopeReports.get(profile);
    const scopesDue =
      scopes?.source === 'probe' &&
      SCOPES.some((s) => scopes.scopes[s] === 'unknown') &&
      now - scopes.checkedAt >= this.recheckMs;
    const accounts = this.accountReports.get(profile);
    const accountsDue =
      accounts !== undefined &&
      now - accounts.checkedAt >=
        (accounts.source === 'unknown' ? this.recheckMs : ACCOUNTS_REFRESH_RECHECKS * this.recheckMs);
    if (!scopesDue && !accountsDue) return;
    this.rechecking.add(profile);
    void Promise.all([
      scopesDue ? this.checkScopes(client.profile, client) : undefined,
      accountsDue ? this.checkAccounts(client.profile, client) : undefined,
    ])
      .then(() => this.reported(profile))
      .finally(() => this.rechecking.delete(profile));
  }

  private reported(profile: string): void {
    this.notify(this.reportListeners, profile);
  }

  private notify(listeners: readonly ((profile: string) => void)[], profile: string): void {
    for (const listener of listeners) {
      try {
        listener(profile);
      } catch (error) {
        this.logger.warn({ profile, err: error }, 'a listener of profile reports failed');
      }
    }
  }

  private async checkScopes(profile: Profile, client: SchedClient): Promise<void> {
    let report: ScopeReport;
    if (!scopesApply(profile)) report = notApplicable(profile, this.clock.now());
    else if (profile.scopes) report = declaredReport(profile.scopes, this.clock.now());
    else {
      report = await client
        .probeScopes()
        .catch(() =>
          scopeReport('probe', Object.fromEntries(SCOPES.map((s) => [s, 'unknown' as const])), this.clock.now()),
        );
    }
    this.scopeReports.set(profile.name, report);
    if (report.missing.length > 0) this.logger.warn({ profile: profile.name, missing: report.missing }, report.detail);
  }

  /** Reads the user's associations; what cannot be read is said, and refuses nothing. */
  private async checkAccounts(profile: Profile, client: SchedClient): Promise<void> {
    if (!accountsApply(profile)) return;
    let report: AccountReport;
    let user: string | null = null;
    try {
      user = slurmUserOf(profile);
      report = user
        ? associationsReport(profile, user, await client.userAccounts(user), this.clock.now())
        : accountsUnknown(null, "the token names no Slurm user (no JWT 'sun' claim)", this.clock.now());
    } catch (error) {
      const status = (error as { status?: number }).status;
      const why =
        status === 404
          ? 'the scheduler serves no accounting (404)'
          : status === 403
            ? 'the associations may not be read (403)'
            : (error as Error).message;
      report = accountsUnknown(user, why, this.clock.now());
    }
    this.accountReports.set(profile.name, report);
    const log = report.defaultNotAssociated ? 'warn' : 'info';
    this.logger[log]({ profile: profile.name, user: report.user, accounts: report.accounts }, report.detail);
  }

  get(profile: string): SchedClient {
    const client = this.clients.get(profile);
    if (client) return client;
    if (!this.profiles.has(profile)) {
      throw new ProfileNotConnectedError(
        `no scheduler profile "${profile}" (have: ${[...this.profiles.keys()].join(', ')})`,
      );
    }
    throw new ProfileNotConnectedError(
      this.problem(profile)?.sentence ?? `the scheduler of profile "${profile}" has not answered yet`,
    );
  }

  connected(profile: string): boolean {
    return this.clients.has(profile);
  }

  async close(): Promise<void> {
    clearInterval(this.recheckTimer);
    this.abort.abort();
    await Promise.allSettled(this.connecting);
    await Promise.all([...this.clients.values()].map((c) => c.close()));
  }
}
