// Run actions, each confirmed in a dialog before it is sent; the server's
// answer is shown in plain words.
import {h, randomKey} from './dom.js';
import {explain} from './errors.js';

// confirmDialog asks question and resolves true when confirmed.
export function confirmDialog(question, confirmText) {
  return new Promise((resolve) => {
    const dlg = h('dialog', {class: 'confirm', 'aria-label': 'Confirm action'},
      h('form', {method: 'dialog'},
        h('p', {}, question),
        h('div', {class: 'buttons'},
          h('button', {value: 'cancel', 'aria-label': 'Cancel'}, 'Cancel'),
          h('button', {value: 'ok', class: 'danger', 'aria-label': `Confirm: ${confirmText}`}, confirmText))));
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      dlg.remove();
    });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// actionBar holds buttons and one message line; act(spec) confirms and runs
// spec.run(), then reports the result.
export function actionBar() {
  const message = h('p', {class: 'action-message', role: 'alert'});
  const buttons = h('div', {class: 'buttons'});
  const el = h('div', {class: 'actions', role: 'toolbar', 'aria-label': 'Run actions'}, buttons, message);
  const byName = new Map();
  return {
    el,
    // add adds a button: spec = {name, label, question, confirm, run: async () => text}.
    add(spec) {
      const b = h('button', {type: 'button', 'data-action': spec.name, 'aria-label': spec.label, disabled: true,
        onclick: () => act(spec)}, spec.label);
      byName.set(spec.name, b);
      buttons.append(b);
    },
    // enable sets which actions are possible now; reasons[name] says why
    // a disabled one is not (its tooltip, and its accessible description).
    enable(names, reasons = {}) {
      for (const [name, b] of byName) {
        b.disabled = !names.includes(name);
        const why = b.disabled ? reasons[name] || 'Not possible now.' : '';
        if (why) {
          b.title = why;
          b.setAttribute('aria-description', why);
        } else {
          b.removeAttribute('title');
          b.removeAttribute('aria-description');
        }
      }
    },
  };
  async function act(spec) {
    if (!await confirmDialog(spec.question, spec.confirm)) return;
    message.dataset.kind = 'pending';
    message.textContent = `${spec.label}…`;
    try {
      message.textContent = await spec.run();
      message.dataset.kind = 'ok';
    } catch (err) {
      message.textContent = explain(err);
      message.dataset.kind = 'error';
    }
  }
}

// clusterActions adds the lifecycle actions of a cluster run. Each reads the
// cluster first: it acts only on runId while it is the current run, at the
// generation just read.
export function clusterActions(bar, conn, runId) {
  const mutate = async (method, params, done) => {
    const got = await conn.call('get', {});
    if (got.status.currentRunId !== runId) throw new Error(`${runId} is no longer the cluster's current run.`);
    await conn.call(method, {...params, ifGeneration: got.status.observedGeneration, idempotencyKey: randomKey()});
    return done;
  };
  bar.add({name: 'suspend', label: 'Suspend', question: `Suspend ${runId}? Running executions finish; nothing new starts until you resume.`,
    confirm: 'Suspend', run: () => mutate('update', {suspended: true}, 'Suspended.')});
  bar.add({name: 'resume', label: 'Resume', question: `Resume ${runId}?`, confirm: 'Resume',
    run: () => mutate('update', {suspended: false}, 'Resumed.')});
  bar.add({name: 'retry', label: 'Retry', question: `Retry the held failure of ${runId}? Its node gets one more attempt.`,
    confirm: 'Retry', run: () => mutate('retry', {}, 'Retry granted.')});
  bar.add({name: 'drain', label: 'Stop (drain)', question: `Stop ${runId}, letting running executions finish? This cannot be undone.`,
    confirm: 'Stop (drain)', run: () => mutate('stop', {mode: 'drain'}, 'Stop requested (drain).')});
  bar.add({name: 'force', label: 'Stop (force)', question: `Stop ${runId} now, cancelling running executions? This cannot be undone.`,
    confirm: 'Stop (force)', run: () => mutate('stop', {mode: 'force'}, 'Stopped (force).')});
}

// clusterEnabled lists the actions a cluster run admits in the state run.
export function clusterEnabled(run, isCurrent) {
  if (!isCurrent || run.finished || !run.status) return [];
  const ds = run.status.operational?.dispatchState;
  const out = [];
  if (ds === 'active') out.push('suspend');
  if (ds === 'suspended') out.push('resume');
  if (run.held && ds === 'active') out.push('retry');
  if (ds === 'active' || ds === 'suspended' || ds === 'draining') out.push('force');
  if (ds === 'active' || ds === 'suspended') out.push('drain');
  return out;
}

// clusterReasons says, for each action of a cluster run, why it is not
// possible in the state run (an action that is possible gets a reason too,
// which enable ignores).
export function clusterReasons(run, isCurrent) {
  const all = (why) => Object.fromEntries(['suspend', 'resume', 'retry', 'drain', 'force'].map((n) => [n, why]));
  if (!run.status) return all('Waiting for the run\'s state.');
  if (run.finished) return all('The run has finished.');
  if (!isCurrent) return all('This is no longer the cluster\'s current run: actions apply to the current run only.');
  const ds = run.status.operational?.dispatchState || 'unknown';
  const state = `Dispatch is ${ds.replace('_', ' ')}`;
  return {
    suspend: `${state}: only an active run can be suspended.`,
    resume: `${state}: only a suspended run can be resumed.`,
    retry: !run.held ? 'No failed step holds the run: there is nothing to retry.' : `${state}: resume the run before retrying.`,
    drain: `${state}: the run is stopping already.`,
    force: `${state}: the run is stopping already.`,
  };
}

// nativeReasons says why a native run's force stop is not possible.
export function nativeReasons(status) {
  if (!status) return {force: 'Waiting for the run\'s state.'};
  return {force: 'The run has finished: there is nothing to stop.'};
}

// nativeActions adds the force action of a native run.
export function nativeActions(bar, conn, runId) {
  bar.add({name: 'force', label: 'Force stop', question: `Force ${runId} to stop, cancelling its running executions? This cannot be undone.`,
    confirm: 'Force stop', run: async () => {
      const r = await conn.call('run/force', {runId});
      return `Force stop requested (now ${r.status.phase}).`;
    }});
}
