// Sign-in. A browser cannot set an Authorization header on a WebSocket, so
// the token is offered as a subprotocol: "oecp.bearer.<base64url token>",
// next to "oecp" (the one the server echoes). The token is kept in this
// tab's sessionStorage only: never in a URL, a cookie or localStorage.
import {h} from './dom.js';

const KEY = 'oecp.token';
const BEARER_PREFIX = 'oecp.bearer.';

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

// protocols lists the subprotocols to offer on the upgrade.
export function protocols() {
  const t = token();
  return t ? [BEARER_PREFIX + base64url(t), 'oecp'] : ['oecp'];
}

function base64url(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// CREDENTIALS names, for each kind of credential the server takes (the
// page's <meta name="oecp-credentials">: "token" for --auth-tokens, "jwt"
// for --auth-jwt), what to paste.
const CREDENTIALS = {
  token: 'an access token from the server\'s --auth-tokens file',
  jwt: 'a JWT from the identity provider the server trusts (--auth-jwt)',
};

// credentialKinds are the kinds of credential the server takes, as the
// page was told ([] when it was not).
export function credentialKinds() {
  const m = document.querySelector('meta[name="oecp-credentials"]');
  return (m?.content || '').split(/\s+/).filter((k) => k in CREDENTIALS);
}

// credentialText says what credential to give: "an access token … or a
// JWT …", or a plain "an access token" when the page was not told.
export function credentialText() {
  const kinds = credentialKinds();
  return kinds.length ? kinds.map((k) => CREDENTIALS[k]).join(', or ') : 'an access token';
}

// signInForm asks for a token; onToken(token) is called on submit.
// reason says why it is shown.
export function signInForm(reason, onToken) {
  const kinds = credentialKinds();
  const label = kinds.length === 1 && kinds[0] === 'jwt' ? 'JWT' : kinds.length === 2 ? 'Access token or JWT' : 'Access token';
  const input = h('input', {type: 'password', id: 'token', name: 'token', autocomplete: 'off',
    required: true, 'aria-label': label, spellcheck: 'false'});
  const form = h('form', {class: 'signin', 'aria-label': 'Sign in', onsubmit: (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (t) onToken(t);
  }},
  h('h1', {}, 'Sign in'),
  h('p', {class: 'signin-reason', role: 'alert'}, reason),
  h('label', {for: 'token'}, label),
  h('p', {class: 'hint credential-kind'}, `Paste ${credentialText()}.`),
  input,
  h('button', {type: 'submit', 'aria-label': 'Sign in with this token'}, 'Sign in'),
  h('p', {class: 'hint'}, 'The token stays in this browser tab until you sign out or close the tab.'));
  queueMicrotask(() => input.focus());
  return form;
}
