// JSON-RPC 2.0 over one browser WebSocket to /oecp. The connection reopens
// by itself after a drop (with backoff) and re-establishes every open
// stream; a stream's params are recomputed at each establishment, so a
// watch resumes strictly after the last cursor its owner has seen.

// RpcError is an error answered by the server: {code, message, data}.
export class RpcError extends Error {
  constructor(err) {
    super(err.message || 'error');
    this.code = err.code;
    this.data = err.data;
  }
}

// ConnectionLost rejects calls made while the socket is not open or that
// were in flight when it dropped.
export class ConnectionLost extends Error {
  constructor() { super('not connected to the server'); }
}

const CLOSE_EXPIRED = 4401;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10000;

// Connection states, sent as a 'state' event with {detail: state}:
// connecting, open, closed (dropped; reconnecting), refused (the upgrade
// was refused while the server is up: sign-in needed), expired (the
// identity expired: sign in again).
export class Connection extends EventTarget {
  #url;
  #protocols;
  #ws = null;
  #nextId = 1;
  #pending = new Map(); // request id → {resolve, reject, onResult}
  #subs = new Map(); // subscriptionId → stream
  #streams = new Set();
  #retryMs = RETRY_MIN_MS;
  #timer = null;
  #stopped = false;
  state = 'connecting';

  // protocols() returns the subprotocols to offer (they carry the token).
  constructor(url, protocols) {
    super();
    this.#url = url;
    this.#protocols = protocols;
  }

  start() {
    this.#stopped = false;
    this.#open();
  }

  stop() {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (this.#ws) this.#ws.close(1000);
  }

  // ready resolves when the connection is open.
  ready() {
    if (this.state === 'open') return Promise.resolve();
    return new Promise((resolve) => {
      const on = (e) => {
        if (e.detail !== 'open') return;
        this.removeEventListener('state', on);
        resolve();
      };
      this.addEventListener('state', on);
    });
  }

  // call sends a unary request and resolves with its result.
  call(method, params = {}) {
    return this.#request(method, params, null);
  }

  // stream keeps a subscription open across reconnects until close():
  // spec = {method, params: () => object, onEvent(params), onEstablished(result),
  // onError(err), onClosed(reason)}. onError ends the stream.
  stream(spec) {
    const s = {spec, id: null, live: true};
    this.#streams.add(s);
    if (this.state === 'open') this.#establish(s);
    return {close: () => this.#closeStream(s)};
  }

  #setState(st) {
    this.state = st;
    this.dispatchEvent(new CustomEvent('state', {detail: st}));
  }

  #open() {
    this.#setState('connecting');
    let opened = false;
    let ws;
    try {
      ws = new WebSocket(this.#url, this.#protocols());
    } catch {
      this.#setState('refused');
      return;
    }
    this.#ws = ws;
    ws.onopen = () => {
      opened = true;
      this.#retryMs = RETRY_MIN_MS;
      this.#setState('open');
      for (const s of this.#streams) this.#establish(s);
    };
    ws.onmessage = (e) => this.#receive(e.data);
    ws.onclose = (e) => this.#dropped(ws, opened, e.code);
  }

  async #dropped(ws, opened, code) {
    if (this.#ws !== ws) return;
    this.#ws = null;
    for (const p of this.#pending.values()) p.reject(new ConnectionLost());
    this.#pending.clear();
    this.#subs.clear();
    for (const s of this.#streams) s.id = null;
    if (this.#stopped) return;
    if (code === CLOSE_EXPIRED) return this.#setState('expired');
    if (!opened && await serverIsUp()) return this.#setState('refused');
    this.#setState('closed');
    this.#timer = setTimeout(() => this.#open(), this.#retryMs);
    this.#retryMs = Math.min(this.#retryMs * 2, RETRY_MAX_MS);
  }

  #request(method, params, onResult) {
    if (this.state !== 'open' || !this.#ws) return Promise.reject(new ConnectionLost());
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, {resolve, reject, onResult});
      this.#ws.send(JSON.stringify({jsonrpc: '2.0', id, method, params}));
    });
  }

  #receive(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (msg.method === 'event') return this.#subs.get(msg.params?.subscriptionId)?.spec.onEvent(msg.params);
    if (msg.method === 'subscription/closed') return this.#subClosed(msg.params);
    const p = this.#pending.get(msg.id);
    if (!p) return;
    this.#pending.delete(msg.id);
    if (msg.error) return p.reject(new RpcError(msg.error));
    // Registered here, before the next frame is read: the server sends a
    // subscription's events only after its result.
    if (p.onResult) p.onResult(msg.result);
    p.resolve(msg.result);
  }

  #establish(s) {
    const {spec} = s;
    this.#request(spec.method, spec.params(), (result) => {
      if (!s.live) return;
      s.id = result.subscriptionId;
      this.#subs.set(s.id, s);
    }).then((result) => {
      if (!s.live) return this.#cancel(result.subscriptionId);
      spec.onEstablished?.(result);
    }, (err) => {
      if (err instanceof ConnectionLost || !s.live) return; // re-established on reconnect
      this.#streams.delete(s);
      s.live = false;
      spec.onError?.(err);
    });
  }

  // A SLOW_CONSUMER close is re-established at once (the params carry the
  // last cursor seen); any other reason ends the stream.
  #subClosed(params) {
    const s = this.#subs.get(params?.subscriptionId);
    if (!s) return;
    this.#subs.delete(s.id);
    s.id = null;
    if (params.reason === 'SLOW_CONSUMER') return this.#establish(s);
    this.#streams.delete(s);
    s.live = false;
    s.spec.onClosed?.(params.reason);
  }

  #closeStream(s) {
    if (!s.live) return;
    s.live = false;
    this.#streams.delete(s);
    if (s.id) {
      this.#subs.delete(s.id);
      this.#cancel(s.id);
    }
  }

  #cancel(subscriptionId) {
    if (this.state !== 'open' || !this.#ws) return;
    this.#ws.send(JSON.stringify({jsonrpc: '2.0', method: 'subscription/cancel', params: {subscriptionId}}));
  }
}

// serverIsUp tells a refused upgrade (server up) from a server that cannot
// be reached, since a browser hides the HTTP status of a failed upgrade.
async function serverIsUp() {
  try {
    const r = await fetch('/healthz', {cache: 'no-store'});
    return r.ok;
  } catch {
    return false;
  }
}
