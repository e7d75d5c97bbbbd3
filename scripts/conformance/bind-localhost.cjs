// Node preload used by harness.sh (NODE_OPTIONS="--require .../bind-localhost.cjs").
//
// The conformance harness starts mock servers (client mode: a mock MCP server, mock
// authorization servers) with listen(0) / app.listen(port) and no host, which binds every
// interface. This shim makes every net/http(s) server that listens on a *bare port* bind
// 127.0.0.1 (or $BIND_HOST) instead. Listens that name a host, a path (unix socket), a handle
// or an fd are left alone.
//
// The bind must stay synchronous: the harness reads server.address().port right after
// listen(0) returns. listen(port, host) would resolve the host with an async dns.lookup and
// address() would still be null at that point, so the shim calls the internal
// net.Server.prototype._listen2 (what listen() itself uses when no host is given) with a
// literal IP. If a Node release drops _listen2, it falls back to listen(port, host).
'use strict';
const net = require('net');

const HOST = process.env.BIND_HOST || '127.0.0.1';
const FAMILY = net.isIPv6(HOST) ? 6 : 4;
const originalListen = net.Server.prototype.listen;

function isPortLike(v) {
  return typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v));
}

net.Server.prototype.listen = function listen(...args) {
  const first = args[0];
  const cb = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
  let port;
  let backlog;

  if (isPortLike(first)) {
    if (typeof args[1] === 'string') return originalListen.apply(this, args); // host given
    port = Number(first);
    if (typeof args[1] === 'number') backlog = args[1];
  } else if (first === undefined || typeof first === 'function') {
    port = 0;
  } else if (
    first && typeof first === 'object' &&
    first.path === undefined && first.fd === undefined && first.handle === undefined &&
    first._handle === undefined && first.host === undefined &&
    (first.port === undefined || isPortLike(first.port))
  ) {
    port = Number(first.port || 0);
    backlog = first.backlog;
  } else {
    return originalListen.apply(this, args);
  }

  if (typeof this._listen2 !== 'function') {
    const rest = [];
    if (backlog !== undefined) rest.push(backlog);
    if (cb) rest.push(cb);
    return originalListen.call(this, port, HOST, ...rest);
  }
  if (cb) this.once('listening', cb);
  // _listen2(address, port, addressType, backlog, fd, flags)
  this._listen2(HOST, port, FAMILY, backlog || 511, undefined, 0);
  return this;
};
