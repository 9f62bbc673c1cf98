import { api, $, showError } from '/console/api.js';

const form = $('login');
form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const button = form.querySelector('button');
  button.disabled = true;
  showError(null);
  try {
    await api('POST', '/api/auth', { password: $('password').value });
    location.assign('/console/');
  } catch (e) {
    showError(e);
    $('password').select();
  } finally {
    button.disabled = false;
  }
});
