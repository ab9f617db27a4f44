import { execFile } from 'node:child_process';
import { userInfo } from 'node:os';
import type { Secret } from '../lib/secret.js';
import type { AuthSettings, Profile } from './profile.js';
import { readToken } from './profile.js';
import { MungeError } from './sched-errors.js';

/** Produces the authentication headers of one request. */
export interface Credentials {
  readonly type: AuthSettings['type'];
  headers(): Promise<Record<string, string>>;
}

/** The header names of the user/token pair differ between the proxy and plain slurmrestd. */
const PAIR_HEADERS = {
  proxy: { user: 'x-sched-user-name', token: 'x-sched-user-token' },
  slurmrestd: { user: 'x-slurm-user-name', token: 'x-slurm-user-token' },
} as const;

/** A fresh `munge -n -t 5` credential: the proxy accepts exactly a 5-second TTL, once. */
export function mungeCredential(timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('munge', ['-n', '-t', '5'], { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
          reject(new MungeError('MUNGE authentication needs the munge command: apt-get install munge'));
        } else if (/socket|connect/i.test(stderr)) {
          reject(
            new MungeError(`munged is not running on this host (start it: service munge start): ${stderr.trim()}`),
          );
        } else {
          reject(new MungeError(`munge failed: ${stderr.trim() || error.message}`));
        }
        return;
      }
      resolve(stdout.trim());
    });
  });
}

export function credentialsFor(profile: Profile, env: NodeJS.ProcessEnv = process.env): Credentials {
  const auth = profile.auth;
  switch (auth.type) {
    case 'bearer': {
      const token: Secret = readToken(auth, env);
      return { type: 'bearer', headers: async () => ({ authorization: `Bearer ${token.reveal()}` }) };
    }
    case 'header-pair': {
      const token = readToken(auth, env);
      const names = PAIR_HEADERS[profile.flavor];
      return {
        type: 'header-pair',
        headers: async () => ({ [names.user]: auth.user, [names.token]: token.reveal() }),
      };
    }
    case 'munge':
      return { type: 'munge', headers: async () => ({ authorization: `MUNGE ${await mungeCredential()}` }) };
  }
}

/**
 * The Slurm user a profile's requests act as, for reading their associations: the header pair
 * names it (slurmrestd refuses a token whose user differs, error 1007); a JWT sent alone is the
 * user of its `sun` claim, as `scontrol token` writes it and slurmrestd reads it; a MUNGE
 * credential carries this process's uid, made on this host. Null when it cannot be told (a
 * token that is no JWT).
 */
export function slurmUserOf(profile: Profile, env: NodeJS.ProcessEnv = process.env): string | null {
  const auth = profile.auth;
  switch (auth.type) {
    case 'header-pair':
      return auth.user;
    case 'bearer':
      return jwtUser(readToken(auth, env).reveal());
    case 'munge':
      return userInfo().username;
  }
}

function jwtUser(token: string): string | null {
  const payload = token.split('.')[1];
  if (!payload) return null;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sun?: unknown };
    return typeof claims.sun === 'string' && claims.sun !== '' ? claims.sun : null;
  } catch {
    return null;
  }
}
