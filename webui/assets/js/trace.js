// A native run's trace id, shown on its page when the server traces
// (oecp serve with tracing on): the run's export answers it in its
// Oecp-Trace-Id header, which the page reads before it cancels the
// download. With --trace-url the id links to the trace viewer (the page's
// <meta name="oecp-trace-url">, {traceId} replaced).
import {h} from './dom.js';
import {token} from './auth.js';

const TRACE_ID = /^[0-9a-f]{32}$/;

export function traceLink(runId) {
  const el = h('p', {class: 'trace', 'aria-label': 'Trace', hidden: true});
  show(el, runId);
  return {el};
}

async function show(el, runId) {
  const ctrl = new AbortController();
  try {
    const t = token();
    const resp = await fetch(`/oecp/runs/${encodeURIComponent(runId)}/export?format=semantic`,
      {cache: 'no-store', signal: ctrl.signal, headers: t ? {Authorization: 'Bearer ' + t} : {}});
    const id = resp.headers.get('Oecp-Trace-Id');
    ctrl.abort();
    if (!id || !TRACE_ID.test(id)) return;
    const tmpl = document.querySelector('meta[name="oecp-trace-url"]')?.content;
    const label = h('code', {'data-trace-id': id}, id);
    el.append('Trace ', tmpl ? h('a', {href: tmpl.replaceAll('{traceId}', id), target: '_blank', rel: 'noopener noreferrer',
      'aria-label': `Open trace ${id} in the trace viewer`}, label) : label);
    el.hidden = false;
  } catch {
    // No trace shown: the server does not trace, or the export is refused.
  }
}
