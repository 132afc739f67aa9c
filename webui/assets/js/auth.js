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

// signInForm asks for a token; onToken(token) is called on submit.
// reason says why it is shown.
export function signInForm(reason, onToken) {
  const input = h('input', {type: 'password', id: 'token', name: 'token', autocomplete: 'off',
    required: true, 'aria-label': 'Access token', spellcheck: 'false'});
  const form = h('form', {class: 'signin', 'aria-label': 'Sign in', onsubmit: (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (t) onToken(t);
  }},
  h('h1', {}, 'Sign in'),
  h('p', {class: 'signin-reason', role: 'alert'}, reason),
  h('label', {for: 'token'}, 'Access token (one of the server\'s --auth-tokens)'),
  input,
  h('button', {type: 'submit', 'aria-label': 'Sign in with this token'}, 'Sign in'),
  h('p', {class: 'hint'}, 'The token stays in this browser tab until you sign out or close the tab.'));
  queueMicrotask(() => input.focus());
  return form;
}
