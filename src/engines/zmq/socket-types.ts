/** The ZMQ socket types implemented here and which peer types each may talk to (RFC 23/ZMTP, RFC 28/REQREP, RFC 29/PUBSUB). Pure. */

export type ZmtpSocketType = "PUB" | "SUB" | "ROUTER" | "DEALER";

const VALID_PEERS: Record<ZmtpSocketType, ReadonlySet<string>> = {
  PUB: new Set(["SUB", "XSUB"]),
  SUB: new Set(["PUB", "XPUB"]),
  ROUTER: new Set(["DEALER", "REQ", "ROUTER"]),
  DEALER: new Set(["DEALER", "REP", "ROUTER"]),
};

export function peerTypeAllowed(ours: ZmtpSocketType, theirs: string): boolean {
  return VALID_PEERS[ours].has(theirs);
}

/** libzmq sends the Identity property only from the socket types that route by it. */
export function sendsIdentity(type: ZmtpSocketType): boolean {
  return type === "ROUTER" || type === "DEALER";
}
