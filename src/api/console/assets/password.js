import { api, $, showError } from '/console/api.js';

const form = $('choose');
const button = form.querySelector('button');

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  showError(null);
  if ($('new').value !== $('again').value) {
    showError('The two new passwords differ.');
    return;
  }
  button.disabled = true;
  try {
    await api('PUT', '/api/auth/password', { current: $('current').value, new: $('new').value });
    location.assign('/console/');
  } catch (e) {
    showError(e);
  }
  button.disabled = false;
});

// Off in the page's HTML until the handler above is in place.
button.disabled = false;
