import { api, $, h, guarded, showError, explain } from '/console/api.js';
import '/console/fleet.js';

/** Reloads the page once the kiosk answers again after a restart; `said` is shown meanwhile. */
async function comeBack(status, said = 'Restarting... the page reloads when the kiosk is back.', waitMs = 120000) {
  status.textContent = said;
  const started = Date.now();
  await new Promise((r) => setTimeout(r, 1500));
  while (Date.now() - started < waitMs) {
    try {
      const res = await fetch('/api/v1/health', { cache: 'no-store' });
      if (res.ok) {
        location.reload();
        return;
      }
    } catch { /* still down */ }
    await new Promise((r) => setTimeout(r, 1000));
  }
  status.textContent = `The kiosk has not come back after ${Math.round(waitMs / 60000)} minutes: it may have stopped.`;
}

/** The firmware card: what runs, the last update's outcome, and the update in progress. */
function showFirmware(u) {
  const now = $('firmware-now');
  if (!u.available) {
    now.textContent = 'This kiosk cannot update itself: its update service (RAUC) does not answer. '
      + 'The kiosk\'s image has it; a development machine does not.';
  } else {
    now.textContent = `Version ${u.firmware_version || 'unknown'}, running from slot ${u.booted_slot}.`;
  }
  $('update-check').disabled = !u.available || u.operation === 'installing';
  const outcome = $('firmware-outcome');
  outcome.hidden = !u.outcome;
  if (u.outcome) {
    const o = u.outcome;
    const when = new Date(o.at * 1000).toLocaleString();
    outcome.textContent = o.result === 'updated'
      ? `Last update: from ${o.from} to ${o.to} (${when}).`
      : `Last update: ${o.to} failed its start check (${o.reason}) and was rolled back on ${when}; ${o.from} runs.`;
    outcome.className = o.result === 'updated' ? '' : 'error';
  }
  // While the museum is open by its hours, waiting for the closing is offered first.
  const closing = u.closing ? ` (${u.closing})` : '';
  $('update-install-closed').textContent = `Install when the museum closes${closing}`;
  $('reboot-closed').textContent = `Reboot when the museum closes${closing}`;
  for (const [row, now, later] of [['update-install-buttons', 'update-install', 'update-install-closed'], ['reboot-buttons', 'reboot', 'reboot-closed']]) {
    $(row).prepend($(u.closing ? later : now));
  }
  showScheduled('update', u.scheduled_install, 'The update installs');
  showScheduled('reboot', u.scheduled_reboot, 'The kiosk reboots');
  const progress = $('update-progress');
  progress.hidden = u.operation !== 'installing';
  progress.value = u.progress.percent;
  const status = $('update-status');
  if (u.operation === 'installing') {
    status.textContent = `Installing: ${u.progress.percent}% ${u.progress.message}`;
  } else if (u.operation === 'installed') {
    status.textContent = `${u.progress.message}.`;
  } else if (u.operation === 'failed') {
    status.textContent = '';
    showError(u.error, $('update-error'));
  }
}

/** What waits for the museum to close (`s`: its `when`), with its cancel button. */
function showScheduled(id, s, what) {
  $(`${id}-scheduled`).hidden = !s;
  if (s) {
    $(`${id}-scheduled-text`).textContent = s.when
      ? `${what} when the museum closes (${s.when}).`
      : `${what} within seconds: the museum is closed (or once the visit under way ends).`;
  }
}

/** Follows an install (every second) and what is scheduled (every five) until neither is left. */
async function followInstall() {
  for (;;) {
    const u = await api('GET', '/api/v1/system/update');
    showFirmware(u);
    const waiting = u.scheduled_install || u.scheduled_reboot;
    if (u.operation !== 'installing' && !waiting) return u;
    await new Promise((r) => setTimeout(r, u.operation === 'installing' ? 1000 : 5000));
  }
}

$('update-check').addEventListener('click', async () => {
  const file = $('update-file').files[0];
  const target = $('update-error');
  showError(null, target);
  $('update-install-row').hidden = true;
  if (!file) {
    showError('Choose an update bundle first.', target);
    return;
  }
  const verdict = $('update-verdict');
  verdict.textContent = `Uploading ${file.name} and checking it...`;
  $('update-check').disabled = true;
  try {
    const res = await fetch('/api/v1/system/update', {
      method: 'POST', credentials: 'same-origin', body: file,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    const v = await res.json().catch(() => null);
    if (!res.ok) throw new Error(explain((v && v.error) || res.statusText, res.status));
    if (v.accepted) {
      verdict.textContent = `${file.name}: version ${v.version} for ${v.compatible}, signed with this kiosk's key. `
        + `Ready to install (running ${v.current_version || 'an unknown version'}).`;
    } else {
      verdict.textContent = `${file.name} cannot be installed: ${v.reason}`;
    }
    $('update-install-row').hidden = !(v.accepted || v.older);
    $('update-force-row').hidden = !v.older;
    $('update-force').checked = false;
  } catch (e) {
    verdict.textContent = '';
    showError(e, target);
  } finally {
    $('update-check').disabled = false;
  }
});

/** Installs the checked bundle `when` ('now' or 'closed'). */
async function install(when) {
  $('update-install-row').hidden = true;
  await api('POST', '/api/v1/system/update/install', { force: $('update-force').checked, when });
  $('update-verdict').textContent = '';
  await followInstall();
}

$('update-install').addEventListener('click', () => guarded(async () => {
  if (!confirm('Install this update? The kiosk keeps running until you reboot it.')) return;
  await install('now');
}, $('update-error')));

$('update-install-closed').addEventListener('click', () => guarded(() => install('closed'), $('update-error')));

$('update-scheduled-cancel').addEventListener('click', () => guarded(async () => {
  showFirmware(await api('DELETE', '/api/v1/system/update/install'));
}, $('update-error')));

$('reboot').addEventListener('click', () => guarded(async () => {
  if (!confirm('Reboot the kiosk now? A visitor\'s conversation is cut; it is back in about a minute.')) return;
  await api('POST', '/api/v1/system/reboot', { when: 'now' });
  await comeBack($('update-status'), 'Rebooting... the page reloads when the kiosk is back.', 300000);
}, $('update-error')));

$('reboot-closed').addEventListener('click', () => guarded(async () => {
  await api('POST', '/api/v1/system/reboot', { when: 'closed' });
  await followInstall();
}, $('update-error')));

$('reboot-scheduled-cancel').addEventListener('click', () => guarded(async () => {
  showFirmware(await api('DELETE', '/api/v1/system/reboot'));
}, $('update-error')));

guarded(followInstall, $('update-error'));

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
  if (!confirm(`Replace everything on this kiosk with ${file.name}? The backup's administrator password, client keys and settings come with it, and everyone is signed out.`)) return;
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

async function loadCertificate() {
  try {
    const c = await api('GET', '/api/v1/tls/certificate');
    $('system-fingerprint').textContent = c.fingerprint;
  } catch {
    $('system-fingerprint').textContent = 'none: this kiosk serves plain HTTP only';
  }
}

$('refresh-logs').addEventListener('click', () => guarded(loadLogs));
loadCertificate();
guarded(loadLogs);

/** The client keys, each with its scope and a way to revoke it. */
async function loadKeys() {
  const { keys } = await api('GET', '/api/v1/client-keys');
  $('keys').replaceChildren(...keys.map((k) => h('tr', {},
    h('td', { text: k.name }),
    h('td', { text: k.scope === 'metrics' ? 'Metrics' : 'Conversation' }),
    h('td', { text: k.last_used_at ? new Date(k.last_used_at).toLocaleString() : 'never' }),
    h('td', {}, h('button', {
      type: 'button',
      class: 'secondary',
      'aria-label': `Revoke ${k.name}`,
      text: 'Revoke',
      onclick: () => guarded(async () => {
        if (!confirm(`Revoke the key ${k.name}? What uses it stops working at once.`)) return;
        await api('DELETE', `/api/v1/client-keys/${encodeURIComponent(k.id)}`);
        await loadKeys();
      }, $('keys-error')),
    })))));
}

$('new-key').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    const made = await api('POST', '/api/v1/client-keys', { name: $('key-name').value, scope: $('key-scope').value });
    $('key-made').textContent = `The key for ${made.name} (shown only now): ${made.key}`;
    $('key-name').value = '';
    await loadKeys();
  }, $('keys-error'));
});
guarded(loadKeys, $('keys-error'));
