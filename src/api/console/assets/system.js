import { api, $, guarded, showError, explain } from '/console/api.js';
import '/console/fleet.js';

/** Reloads the page once the kiosk answers again after a restart; `said` is shown meanwhile. */
async function comeBack(status, said = 'Restarting... the page reloads when the kiosk is back.') {
  status.textContent = said;
  const started = Date.now();
  await new Promise((r) => setTimeout(r, 1500));
  while (Date.now() - started < 120000) {
    try {
      const res = await fetch('/api/v1/health', { cache: 'no-store' });
      if (res.ok) {
        location.reload();
        return;
      }
    } catch { /* still down */ }
    await new Promise((r) => setTimeout(r, 1000));
  }
  status.textContent = 'The kiosk has not come back after two minutes: it may have stopped.';
}

$('restart').addEventListener('click', () => guarded(async () => {
  if (!confirm('Restart the kiosk now?')) return;
  await api('POST', '/api/v1/system/restart');
  await comeBack($('restart-status'));
}));

$('restore').addEventListener('click', async () => {
  const file = $('restore-file').files[0];
  const target = $('restore-error');
  showError(null, target);
  if (!file) {
    showError('Choose a backup file first.', target);
    return;
  }
  if (!confirm(`Replace everything on this kiosk with ${file.name}?`)) return;
  const status = $('restore-status');
  status.textContent = 'Uploading and checking...';
  // One restore at a time: a second click would only be refused as a conflict.
  $('restore').disabled = true;
  try {
    const res = await fetch('/api/v1/system/restore', {
      method: 'POST', credentials: 'same-origin', body: file,
      headers: { 'Content-Type': 'application/x-tar' },
    });
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new Error(explain((data && data.error) || res.statusText, res.status));
    // What comes back, and that it asks to sign in again (sessions are not backed up).
    const kb = Math.max(1, Math.round(data.bytes / 1024));
    await comeBack(status, `${file.name} checked: the backup of ${new Date(data.created).toLocaleString()}`
      + ` with ${data.characters} character(s) and ${data.blobs} stored file(s) (${kb} KB) is staged.`
      + ' Restarting into it... the page reloads when the kiosk is back: sign in again then.');
  } catch (e) {
    status.textContent = '';
    showError(e, target);
    $('restore').disabled = false;
  }
});

$('password').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    await api('PUT', '/api/auth/password', { current: $('current').value, new: $('new').value });
    $('password').reset();
    $('password-status').textContent = 'Password changed; every other session has ended.';
  }, $('password-error'));
});

$('everywhere').addEventListener('click', () => guarded(async () => {
  const r = await api('POST', '/api/auth/logout-all');
  $('everywhere-status').textContent = `${r.ended} other session(s) ended.`;
}));

async function loadLogs() {
  const r = await api('GET', '/api/v1/system/logs?lines=300');
  const pre = $('logs');
  pre.textContent = r.lines.join('\n');
  pre.scrollTop = pre.scrollHeight;
}

$('refresh-logs').addEventListener('click', () => guarded(loadLogs));
guarded(loadLogs);
