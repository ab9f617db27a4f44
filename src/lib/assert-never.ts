/** Exhaustiveness check for `switch` statements: a new union member breaks the build here. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
