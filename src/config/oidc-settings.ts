import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { OWNER_NAME } from '../access/principal.js';
import { API_SCOPES } from '../db/schema.js';
import { ConfigError } from '../errors.js';

/** The file naming the identity provider of the web UI's single sign-on, in the configuration folder. */
export const OIDC_FILE = 'oidc.yaml';
export const OIDC_FILE_ENV = 'SCHEDFLOW_OIDC_CONFIG';

/** One value of the mapped claim (a group, a user name) and what a user holding it gets. */
const mappingSchema = z
  .object({
    value: z.string().min(1),
    /** Whose requests and runs the user acts on; unset: the owner another matching entry names, else `default`. */
    owner: z.string().regex(OWNER_NAME, 'an owner name: letters, digits, `.`, `_`, `-`').optional(),
    scopes: z.array(z.enum(API_SCOPES)).min(1),
  })
  .strict();
export type OidcMapping = z.output<typeof mappingSchema>;

/** Scope names as RFC 6749 allows them (printable ASCII but space, `"` and `\`). */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Single sign-on for the web UI with OpenID Connect (docs/sso.md): the provider, this client,
 * and the claim whose values map a user to an owner and scopes. The client secret is named by
 * its file, never written here: this file may be kept in git with the rest of the configuration.
 */
export const oidcSettingsSchema = z
  .object({
    /** The issuer URL; its `/.well-known/openid-configuration` is read at the first login. */
    issuer: z.url({ protocol: /^https?$/ }),
    /** What the login page's button says: "Log in with <name>". */
    name: z.string().trim().min(1).max(60).default('single sign-on'),
    clientId: z.string().min(1),
    /** A file holding the client secret (0600); unset: a public client, PKCE alone. */
    clientSecretFile: z.string().min(1).optional(),
    /** Where the provider sends the browser back; unset: `http://<listen>/ui/login/oidc/callback`. */
    redirectUrl: z.url({ protocol: /^https?$/ }).optional(),
    /** Where the provider sends the browser after logging out there; unset: the login page, beside `redirectUrl`. */
    postLogoutRedirectUrl: z.url({ protocol: /^https?$/ }).optional(),
    scopes: z
      .array(z.string().regex(SCOPE_TOKEN))
      .default(['openid', 'profile', 'email'])
      .refine((s) => s.includes('openid'), 'must include `openid`'),
    /** The claim (of the ID token, else of the userinfo answer) whose values are mapped. */
    claim: z.string().min(1).default('groups'),
    /** The claim naming the user in the actor `ui:<name>` and the page header; `sub` when absent. */
    usernameClaim: z.string().min(1).default('preferred_username'),
    map: z.array(mappingSchema).min(1),
    /** A single-sign-on session ends this long after its login, used or not (at most 24 h, the store's own bound). */
    sessionMaxAgeSec: z
      .number()
      .int()
      .positive()
      .max(24 * 3600)
      .default(8 * 3600),
  })
  .strict();
export type OidcSettings = z.output<typeof oidcSettingsSchema>;
export type OidcSettingsInput = z.input<typeof oidcSettingsSchema>;

/**
 * The OIDC settings file: the one SCHEDFLOW_OIDC_CONFIG names (which must exist), else
 * `<config>/oidc.yaml` when it exists, else none (no single sign-on). Relative paths in it
 * (the secret file) are taken from the file's folder.
 */
export function readOidcFile(env: NodeJS.ProcessEnv, configDir: string): unknown {
  const named = env[OIDC_FILE_ENV]?.trim();
  const file = named ? resolve(named) : join(resolve(configDir), OIDC_FILE);
  if (!named && !existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`${OIDC_FILE_ENV}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`${file} is not YAML: ${(error as Error).message.split('\n')[0]}`);
  }
  if (value && typeof value === 'object' && 'clientSecretFile' in value) {
    const secretFile = (value as { clientSecretFile: unknown }).clientSecretFile;
    if (typeof secretFile === 'string' && secretFile && !isAbsolute(secretFile)) {
      return { ...value, clientSecretFile: join(resolve(file, '..'), secretFile) };
    }
  }
  return value;
}
