// The panels of a run's page: event timeline, logs with a filter, the live
// output of one execution, and the terminal result.
import {h, replace} from './dom.js';
import {explain} from './errors.js';

// MAX_LINES bounds what a panel keeps; older lines are dropped first.
const MAX_LINES = 2000;

function bounded(list) {
  while (list.children.length > MAX_LINES) list.firstElementChild.remove();
  // Follow the end unless the reader scrolled up.
  const box = list.parentElement;
  if (box && box.scrollHeight - box.scrollTop - box.clientHeight < 80) box.scrollTop = box.scrollHeight;
}

export function timelinePanel() {
  const list = h('ol', {class: 'timeline', 'aria-live': 'polite'});
  const el = h('section', {class: 'panel', 'aria-label': 'Events'}, h('h2', {}, 'Events'), h('div', {class: 'scroll'}, list));
  return {
    el,
    add(entry) {
      list.append(h('li', {'data-type': entry.type, title: entry.cursor}, h('span', {class: 'cursor'}, entry.cursor), ' ', entry.text));
      bounded(list);
    },
  };
}

// logsPanel lists log records; the filter keeps lines whose level, target or
// message contains its text.
export function logsPanel(note) {
  const list = h('ol', {class: 'logs'});
  const filter = h('input', {type: 'search', placeholder: 'filter', 'aria-label': 'Filter logs', oninput: () => apply()});
  const apply = () => {
    const q = filter.value.trim().toLowerCase();
    for (const li of list.children) li.hidden = q !== '' && !li.textContent.toLowerCase().includes(q);
  };
  const el = h('section', {class: 'panel', 'aria-label': 'Logs'},
    h('h2', {}, 'Logs ', filter), h('p', {class: 'hint'}, note), h('div', {class: 'scroll'}, list));
  return {
    el,
    add(record, target) {
      const li = h('li', {'data-level': record.level}, h('span', {class: 'level'}, record.level), ' ',
        h('span', {class: 'target'}, target || record.target), ' ', record.message);
      list.append(li);
      const q = filter.value.trim().toLowerCase();
      li.hidden = q !== '' && !li.textContent.toLowerCase().includes(q);
      bounded(list);
    },
    filter,
  };
}

// attachPanel shows the live output of one execution at a time.
export function attachPanel() {
  const title = h('h2', {}, 'Live output');
  const status = h('p', {class: 'hint', role: 'status'}, 'Click a running node to follow its output.');
  const list = h('ol', {class: 'output', 'aria-label': 'Execution output'});
  const el = h('section', {class: 'panel', 'aria-label': 'Live output'}, title, status, h('div', {class: 'scroll'}, list));
  let stream = null;
  const close = () => {
    stream?.close();
    stream = null;
  };
  const event = (ev) => {
    if (ev.type === 'working') status.textContent = 'working';
    else if (ev.type === 'settled') status.textContent = 'settled: the execution has ended';
    else if (ev.type === 'output') {
      list.append(h('li', {}, ev.text));
      bounded(list);
    }
  };
  return {
    el,
    close,
    // follow shows execution's output from a subscription (agent/attach
    // or run/attach) in place of the one shown before.
    follow(conn, method, params, execution) {
      close();
      title.textContent = `Live output of ${execution}`;
      status.textContent = 'connecting…';
      replace(list);
      stream = conn.stream({method, params: () => params, onEvent: (p) => event(p.event),
        onEstablished: () => { status.textContent = 'attached'; },
        onError: (err) => { status.textContent = explain(err); },
        onClosed: (reason) => { status.textContent = reason === 'done' ? 'the execution has ended' : `stream ended (${reason})`; }});
    },
    say(text) {
      close();
      status.textContent = text;
    },
  };
}

// resultPanel shows a TerminalResult, and where a git delivery put the
// change: its branch and its pull request (a link where the server knows
// the address, else its number).
export function resultPanel() {
  const body = h('div', {class: 'result'}, 'The run has not finished.');
  const delivery = h('div', {class: 'delivery', 'aria-label': 'Delivery', hidden: true});
  const el = h('section', {class: 'panel', 'aria-label': 'Result'}, h('h2', {}, 'Result'), body, delivery);
  return {
    el,
    // delivered shows a delivery receipt (see capsule.Receipt).
    delivered(r) {
      const pr = /^https:\/\//.test(r.pullRequestUrl || '')
        ? h('a', {href: r.pullRequestUrl, class: 'pull-request', target: '_blank', rel: 'noopener noreferrer'}, r.pullRequestUrl)
        : h('span', {class: 'pull-request'}, `#${r.pullRequestId}`);
      delivery.hidden = false;
      replace(delivery,
        h('p', {}, 'Delivered branch ', h('code', {class: 'branch'}, r.branch), ` (head ${r.headRevision.slice(0, 12)}) of ${r.repository}.`),
        h('p', {}, 'Pull request ', pr, ` into ${r.targetBranch} (${r.outcome}).`));
    },
    show(tr, stopMode) {
      if (!tr) return replace(body, stopMode ? `Stopped (${stopMode}) without a result.` : 'Finished.');
      if (tr.status === 'succeeded') {
        return replace(body, h('p', {'data-status': 'succeeded'}, 'Succeeded with output:'), h('pre', {}, JSON.stringify(tr.output, null, 2)));
      }
      replace(body, h('p', {'data-status': 'failed'}, `Failed: ${tr.reason}`));
    },
  };
}

// runHeader is the page heading with a phase badge; set(phase, details) updates it.
export function runHeader(kind, runId) {
  const badge = h('span', {class: 'phase', 'data-phase': 'unknown', role: 'status', 'aria-label': 'Run phase'}, '…');
  const meta = h('p', {class: 'run-meta'});
  return {
    el: h('header', {class: 'run-head'}, h('h1', {}, `${kind} run ${runId} `, badge), meta),
    // set shows the phase and the details; note, when given, is the
    // details' tooltip (what a "—" or "≥" in them means).
    set(phase, details, note) {
      badge.textContent = phase;
      badge.dataset.phase = phase;
      meta.textContent = details;
      if (note) meta.title = note;
      else meta.removeAttribute('title');
    },
  };
}
