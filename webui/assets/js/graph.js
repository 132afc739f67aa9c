// Draws a GraphSpec as nested boxes, the way the graph nests: a seq stacks
// its children, a par lays its branches side by side, a choice shows each
// branch under its guard, a loop and a map frame their body. Executable
// nodes (step, verifier) are buttons that open their live output; every
// node carries data-node and data-state so the page can recolour it.
import {h} from './dom.js';
import {children} from './fold.js';

// drawGraph returns the graph element; onSelect(name) is called when an
// executable node is clicked.
export function drawGraph(spec, onSelect) {
  return h('div', {class: 'graph', role: 'group', 'aria-label': 'Graph'}, drawNode(spec.root, onSelect));
}

function drawNode(g, onSelect) {
  switch (g.kind) {
    case 'step': case 'verifier': return executable(g, onSelect);
    case 'succeed': case 'fail': return terminal(g);
    default: return group(g, onSelect);
  }
}

function executable(g, onSelect) {
  return h('button', {type: 'button', class: `node leaf kind-${g.kind}`, 'data-node': g.name, 'data-state': 'pending',
    'aria-label': label(g.kind, g.name, 'pending'), onclick: () => onSelect(g.name)},
  h('span', {class: 'node-name'}, g.name),
  h('span', {class: 'node-worker'}, g.worker),
  h('span', {class: 'node-state'}, 'pending'),
  h('span', {class: 'node-attempt'}));
}

function terminal(g) {
  return h('div', {class: `node terminal kind-${g.kind}`, 'data-node': g.name, 'data-state': 'pending',
    role: 'img', 'aria-label': label(g.kind, g.name, 'pending')},
  h('span', {class: 'node-name'}, g.name),
  h('span', {class: 'node-worker'}, g.kind === 'fail' ? `fail: ${g.reason}` : 'succeed'),
  h('span', {class: 'node-state'}, 'pending'));
}

function group(g, onSelect) {
  const body = h('div', {class: 'group-body'});
  if (g.kind === 'choice') {
    g.branches.forEach((b) => body.append(branch(`when ${guardText(b.when)}`, drawNode(b.node, onSelect))));
    if (g.otherwise) body.append(branch('otherwise', drawNode(g.otherwise, onSelect)));
  } else {
    children(g).forEach((c, i) => {
      if (g.kind === 'seq' && i > 0) body.append(h('div', {class: 'arrow', 'aria-hidden': 'true'}, '↓'));
      body.append(drawNode(c, onSelect));
    });
  }
  return h('section', {class: `group kind-${g.kind}`, 'data-node': g.name, 'data-state': 'pending', 'aria-label': `${g.kind} ${g.name}`},
    h('header', {class: 'group-head'}, h('span', {class: 'group-kind'}, g.kind), ' ', h('span', {class: 'node-name'}, g.name),
      h('span', {class: 'group-detail'}, groupDetail(g))),
    body);
}

function branch(caption, el) {
  return h('div', {class: 'branch'}, h('div', {class: 'branch-guard'}, caption), el);
}

function groupDetail(g) {
  switch (g.kind) {
    case 'par': return ` · join ${g.join.kind}${g.join.count ? ' ' + g.join.count : ''}${g.join.when ? ' when ' + guardText(g.join.when) : ''}`;
    case 'loop': return ` · ${g.until ? 'until ' + guardText(g.until) + ' · ' : ''}at most ${g.maxIterations}`;
    case 'map': return ` · over ${g.over.source}.${g.over.path.join('.')} · at most ${g.maxItems}`;
    default: return '';
  }
}

function control(c) {
  return `${c.name}.${c.source}${c.field ? '.' + c.field : ''}`;
}

// guardText renders a Guard in one line, e.g. "check.signal.verdict ∈ {approved}".
export function guardText(g) {
  switch (g.kind) {
    case 'in': return `${control(g.value)} ∈ {${g.labels.join(', ')}}`;
    case 'all': return g.guards.map(guardText).join(' and ');
    case 'any': return g.guards.map(guardText).join(' or ');
    case 'not': return `not (${guardText(g.guard)})`;
    case 'k_of_n': return `${g.count} of [${g.values.map(control).join(', ')}] ∈ {${g.labels.join(', ')}}`;
    case 'k_of_map': return `${g.count} of ${control(g.value)} ∈ {${g.labels.join(', ')}}`;
    default: return g.kind;
  }
}

function label(kind, name, state) {
  return `${kind} ${name}: ${state}`;
}

// paint sets every drawn node's state from nodes (name → {state, attempt,
// begins}); group nodes show running while any node inside runs, and
// failed or held when one inside is.
export function paint(root, nodes) {
  for (const el of root.querySelectorAll('.node')) {
    const n = nodes.get(el.dataset.node);
    const state = n ? n.state : 'pending';
    el.dataset.state = state;
    el.querySelector('.node-state').textContent = state;
    const kind = [...el.classList].find((c) => c.startsWith('kind-')).slice(5);
    el.setAttribute('aria-label', label(kind, el.dataset.node, state));
    const att = el.querySelector('.node-attempt');
    if (att) att.textContent = n && n.begins > 1 ? `${n.begins} executions` : '';
  }
  for (const el of [...root.querySelectorAll('.group')].reverse()) {
    const inner = [...el.querySelectorAll('.node')].map((x) => x.dataset.state);
    el.dataset.state = ['running', 'held', 'failed'].find((s) => inner.includes(s)) ||
      (inner.length && inner.every((s) => s === 'pending') ? 'pending' : 'mixed');
  }
}
