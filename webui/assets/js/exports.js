// Downloads of a native run's two exports (JSONL): the trace and the
// semantic view, from GET /oecp/runs/<runId>/export?format=…, which
// resolves the caller exactly as the WebSocket does. The page fetches the
// export itself, with the signed-in token as an Authorization header (a
// link cannot carry one), and saves what it read as a file; a refusal is
// shown in plain words. Without a token the links also work on their own.
import {h} from './dom.js';
import {token} from './auth.js';

export function exportLinks(runId) {
  const message = h('span', {class: 'export-message', role: 'status'});
  const link = (format, label) => {
    const href = `/oecp/runs/${encodeURIComponent(runId)}/export?format=${format}`;
    const name = `${runId}.${format}.jsonl`;
    return h('a', {href, download: name, class: 'export', 'data-export': format,
      'aria-label': `Download the ${label} of run ${runId}`, onclick: (e) => {
        e.preventDefault();
        download(href, name, label, message);
      }}, `Download ${label}`);
  };
  const el = h('div', {class: 'exports', role: 'group', 'aria-label': 'Exports'},
    link('trace', 'trace'), link('semantic', 'semantic view'), message);
  return {el};
}

async function download(href, name, label, message) {
  message.dataset.kind = 'pending';
  message.textContent = `Reading the ${label}…`;
  try {
    const t = token();
    const resp = await fetch(href, {cache: 'no-store', headers: t ? {Authorization: 'Bearer ' + t} : {}});
    if (!resp.ok) {
      const body = await resp.json().catch(() => null);
      throw new Error(body && body.error ? `${body.error.message} (${body.error.code})` : `HTTP ${resp.status}`);
    }
    const url = URL.createObjectURL(await resp.blob());
    const a = h('a', {href: url, download: name, hidden: true});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    message.dataset.kind = 'ok';
    message.textContent = `Saved ${name}.`;
  } catch (err) {
    message.dataset.kind = 'error';
    message.textContent = `The ${label} could not be read: ${err.message}`;
  }
}
