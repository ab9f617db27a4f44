import { inspect } from 'node:util';

/**
 * A secret value (token, key). It prints as `[redacted]` in logs, JSON,
 * template strings and util.inspect; only `reveal()` gives the value, at the
 * one place that sends it.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[redacted]';
  }

  toJSON(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return 'Secret([redacted])';
  }
}
