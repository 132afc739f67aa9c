// The web view's entry point: opens the connection to /oecp, shows its
// state, asks for a token when the server refuses the connection, and
// routes /ui/ to the runs page and /ui/runs/<runId> to a run's page.
import {h, replace, link} from './dom.js';
import {Connection} from './rpc.js';
import {protocols, signInForm, setToken, token, credentialText} from './auth.js';
import {runsPage} from './runs.js';
import {runPage} from './run.js';

const main = document.getElementById('main');
const indicator = document.getElementById('connection');
const signOut = document.getElementById('sign-out');
const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/oecp`;
const conn = new Connection(url, protocols);
let page = null;

const STATE_TEXT = {
  connecting: 'connecting…',
  open: 'connected',
  closed: 'disconnected — reconnecting',
  refused: 'not signed in',
  expired: 'sign-in expired',
};

conn.addEventListener('state', (e) => {
  indicator.textContent = STATE_TEXT[e.detail];
  indicator.dataset.state = e.detail;
  signOut.hidden = !token();
  if (e.detail === 'refused') showSignIn(token() ? 'The server refused this token.' : `The server refused the connection: it needs ${credentialText()} (or it does not accept this page's origin).`);
  if (e.detail === 'expired') showSignIn('Your sign-in has expired. Sign in again.');
  if (e.detail === 'open' && !page) route();
});

function showSignIn(reason) {
  page?.close();
  page = null;
  setToken('');
  replace(main, signInForm(reason, (t) => {
    setToken(t);
    replace(main, h('p', {class: 'page-message', role: 'status'}, 'Signing in…'));
    conn.start();
  }));
}

function route() {
  page?.close();
  const path = location.pathname;
  const m = path.match(/^\/ui\/runs\/([^/]+)\/?$/);
  if (m) page = runPage(conn, main, decodeURIComponent(m[1]));
  else if (path === '/ui/' || path === '/ui') page = runsPage(conn, main);
  else {
    page = null;
    replace(main, h('h1', {}, 'Not found'), h('p', {}, 'There is no page here. ', link('/ui/', 'See the runs.')));
  }
}

signOut.addEventListener('click', () => {
  setToken('');
  conn.stop();
  showSignIn('Signed out.');
});
window.addEventListener('popstate', () => { if (conn.state === 'open') route(); });
conn.start();
