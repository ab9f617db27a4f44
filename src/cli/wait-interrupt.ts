import { printError } from './terminal.js';

/** The exit code of a command stopped by Ctrl-C, as a shell reports it: 128 + SIGINT's 2. */
export const INTERRUPTED_EXIT = 130;

/**
 * While a command follows something the daemon does (`--wait`), Ctrl-C stops only the
 * following: the job or run goes on in the daemon, and `say()` tells the user so, with the
 * command that would cancel it. Returns the function that ends the watch.
 */
export function onInterrupt(say: () => string): () => void {
  const handler = () => {
    printError(`\n${say()}\n`);
    process.exit(INTERRUPTED_EXIT);
  };
  process.once('SIGINT', handler);
  return () => process.off('SIGINT', handler);
}
