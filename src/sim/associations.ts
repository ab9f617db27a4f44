import type { SimUser } from './sim-config.js';

/** What slurmdbd's associations say about one user when they submit. */
export interface UserAssociations {
  /** Account charged when the job names none. */
  defaultAccount: string | undefined;
  /** Accounts the user may charge; undefined: any (a user the simulator was not told about). */
  accounts: readonly string[] | undefined;
  /** MaxSubmitJobs: pending and running jobs allowed at once; undefined: no limit. */
  maxSubmitJobs: number | undefined;
}

/** One user association as slurmdbd lists it (`sacctmgr show assoc`). */
export interface AssociationRecord {
  id: number;
  user: string;
  account: string;
  isDefault: boolean;
}

/**
 * The simulated slurmdbd's user associations (`sacctmgr add user … account= defaultaccount=`),
 * from the simulator's `users` settings. The submit limit can change while the simulator runs,
 * as `sacctmgr modify user … set MaxSubmitJobs=` changes it on a real cluster.
 */
export class Associations {
  private readonly limits = new Map<string, number | undefined>();

  constructor(private readonly users: Readonly<Record<string, SimUser>>) {}

  of(user: string): UserAssociations {
    const settings = this.users[user];
    const defaultAccount = settings?.defaultAccount;
    return {
      defaultAccount,
      accounts: settings?.accounts ?? (defaultAccount === undefined ? undefined : [defaultAccount]),
      maxSubmitJobs: this.limits.has(user) ? this.limits.get(user) : settings?.maxSubmitJobs,
    };
  }

  /**
   * The user associations `GET /slurmdb/{v}/associations` lists, in the order of the users'
   * settings, filtered as slurmdbd filters (`user`, `account`: any of the values). A user
   * configured without accounts or default account has none (the simulator lets them charge any).
   */
  list(filter: { users?: readonly string[] | undefined; accounts?: readonly string[] | undefined } = {}) {
    const records: AssociationRecord[] = [];
    let id = 0;
    for (const user of Object.keys(this.users)) {
      const { defaultAccount, accounts } = this.of(user);
      for (const account of accounts ?? []) {
        id++;
        if (filter.users && !filter.users.includes(user)) continue;
        if (filter.accounts && !filter.accounts.includes(account)) continue;
        records.push({ id, user, account, isDefault: account === defaultAccount });
      }
    }
    return records;
  }

  /** Sets (null: removes) the user's MaxSubmitJobs, as `sacctmgr … set MaxSubmitJobs=<n>` (or -1) does. */
  setMaxSubmitJobs(user: string, limit: number | null): void {
    this.limits.set(user, limit ?? undefined);
  }
}
