import { ConfigError } from '../errors.js';

/** Where the local HTTP API listens. */
export interface ListenAddress {
  host: string;
  /** 0 picks a free one. */
  port: number;
}

/** What a listen address looks like, for messages. */
export const LISTEN_ADDRESS_FORM = 'host:port, e.g. 127.0.0.1:8080 or [::1]:8080';

/**
 * The one reader of a listen address (`--listen`, `SCHEDFLOW_LISTEN`): `host:port` or
 * `[v6]:port`, the port at most 65535. Null when the text is not one; the configuration's
 * schema refuses it with the setting's name, and {@link parseListenAddress} with the flag's.
 */
export function readListenAddress(text: string): ListenAddress | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const port = Number(match?.[3]);
  const host = match?.[1] ?? match?.[2];
  if (!match || !host || port > 65_535) return null;
  return { host, port };
}

/** {@link readListenAddress}, throwing a ConfigError that names `--listen` for text that is not one. */
export function parseListenAddress(text: string): ListenAddress {
  const address = readListenAddress(text);
  if (!address) throw new ConfigError(`--listen "${text}": expected ${LISTEN_ADDRESS_FORM}`);
  return address;
}
