/** Whether a client address is this machine's loopback (IPv4 127/8, IPv6 ::1, or IPv4-mapped 127/8). */
export function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}
