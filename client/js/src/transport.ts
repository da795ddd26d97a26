// Telling a TLS/plaintext mismatch from other failures to connect.
//
// A client speaking TLS to a server in plaintext fails in Node's words
// (INTERNAL, "wrong version number"), one speaking plaintext to a TLS server
// in HTTP/2's (CANCELLED, "stream closed with error code CANCEL"); neither
// says what to change. So when a call fails before any response came, the
// server is asked directly, once, by a TLS handshake that verifies nothing
// and is closed without a request: a TLS server answers in TLS, a plaintext
// one with bytes that are not a TLS record. When that contradicts the
// client's setting, the call fails with UNAVAILABLE saying in one line
// which the server speaks and which option to change, as the Go and Python
// clients do.

import { connect, type TLSSocket } from "node:tls";
import { isIP } from "node:net";

import { Code, type ConnectError } from "@connectrpc/connect";

/** How long the probe may take: a failed call waits for it. */
export const PROBE_TIMEOUT_MS = 2_000;

/** What the server at an address speaks, as far as a probe can tell. */
export type Speaks = "tls" | "plaintext" | undefined;

/** The codes a call that could not reach the server fails with, in Connect's mapping of Node's errors. */
const CONNECT_FAILURE_CODES = new Set([Code.Unavailable, Code.Internal, Code.Canceled, Code.Unknown]);

/** The TLS library's words for a reply that is not a TLS record. */
const NOT_TLS = /wrong version number|packet length too long|record length mismatch|http request/i;

/** The TLS library's error codes for an alert: a TLS server refusing this handshake. */
const ALERT = /^ERR_SSL_(SSLV3|TLSV1[0-9_]*)_ALERT_/;

/**
 * What a call that failed with `err` says instead, when the server at
 * `host:port` (the target the client dialled) speaks the other of TLS and
 * plaintext; undefined otherwise. Only a failure before any response is
 * looked into.
 */
export async function mismatch(target: string, address: { host: string; port: number }, plaintext: boolean, err: ConnectError): Promise<string | undefined> {
  if (!CONNECT_FAILURE_CODES.has(err.code) || [...err.metadata.keys()].length > 0) return undefined;
  const speaks = await probe(address.host, address.port);
  if (speaks === "plaintext" && !plaintext) return `historyd at ${target} speaks plaintext, not TLS: pass { plaintext: true }`;
  if (speaks === "tls" && plaintext) return `historyd at ${target} speaks TLS, not plaintext: drop plaintext: true (tls: { ca } for a private CA)`;
  return undefined;
}

/** Whether the server at host:port speaks TLS or plaintext; undefined when it cannot be told. */
export function probe(host: string, port: number, timeoutMs = PROBE_TIMEOUT_MS): Promise<Speaks> {
  return new Promise((resolve) => {
    let socket: TLSSocket;
    const done = (speaks: Speaks) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(speaks);
    };
    // What is asked is the protocol, not who answers: nothing is verified.
    socket = connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ["h2"], ...(isIP(host) ? {} : { servername: host }) });
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.once("secureConnect", () => done("tls"));
    socket.once("error", (e: NodeJS.ErrnoException) => {
      if (NOT_TLS.test(e.message)) done("plaintext");
      else if (ALERT.test(e.code ?? "")) done("tls");
      else done(undefined); // refused, reset, hung up: says nothing either way
    });
    socket.once("close", () => done(undefined));
  });
}

/** The host and port a target names ("host:port", "dns:///host:port", "[::1]:port"). */
export function hostPort(target: string): { host: string; port: number } | undefined {
  const address = target.startsWith("dns:///") ? target.slice("dns:///".length) : target;
  const m = /^(?:\[([^\]]+)\]|([^:/[\]]+))(?::(\d+))?$/.exec(address);
  if (!m) return undefined;
  const port = m[3] === undefined ? 443 : Number(m[3]);
  return port > 0 && port < 65536 ? { host: (m[1] ?? m[2])!, port } : undefined;
}
