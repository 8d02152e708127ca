'use strict';
// Live output on the run page: while a run has not ended, its stdout and
// stderr are fetched from GET /api/history/ID/output with the byte offsets
// already shown (outNext / errNext), and appended as they come. When the
// run ends the page is drawn again with its result. Loaded before app.js,
// whose runView() calls followRun(); it uses app.js's api(), el() and
// viewIs() at run time.

const LIVE_POLL_MS = 400;

function followRun(e, seq) {
  const panes = { stdout: document.getElementById('run-stdout'), stderr: document.getElementById('run-stderr') };
  if (!panes.stdout || !panes.stderr) return;
  const marker = el('p', { id: 'run-live', class: 'muted' }, 'Running: output shown as it comes.');
  panes.stdout.parentNode.insertBefore(marker, panes.stdout.previousSibling);
  const at = { out: 0, err: 0 };
  const shown = { stdout: false, stderr: false };
  const add = (name, text) => {
    if (!text) return;
    const pane = panes[name];
    const atBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 4;
    if (!shown[name]) { pane.textContent = ''; shown[name] = true; }
    pane.append(document.createTextNode(text));
    if (atBottom) pane.scrollTop = pane.scrollHeight;
  };
  const tick = async () => {
    if (!viewIs(seq)) return;
    const r = await api('GET', '/api/history/' + enc(e.id) + '/output?out=' + at.out + '&err=' + at.err);
    if (!viewIs(seq)) return;
    if (r.status === 200) {
      add('stdout', r.data.stdout);
      add('stderr', r.data.stderr);
      at.out = r.data.outNext;
      at.err = r.data.errNext;
      if (r.data.completed) { route(); return; }
    }
    setTimeout(tick, LIVE_POLL_MS);
  };
  tick();
}
