import { api, $, showError } from '/console/api.js';

const form = $('login');
const button = form.querySelector('button');

/** After too many wrong passwords: the button waits out the kiosk's remaining lockout. */
function lockout(seconds) {
  let left = seconds;
  button.disabled = true;
  const tick = () => {
    if (left <= 0) {
      button.disabled = false;
      button.textContent = 'Sign in';
      return;
    }
    button.textContent = `Sign in (wait ${left} s)`;
    left -= 1;
    setTimeout(tick, 1000);
  };
  tick();
}

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  if (button.disabled) return;
  button.disabled = true;
  showError(null);
  try {
    await api('POST', '/api/auth', { password: $('password').value });
    location.assign('/console/');
  } catch (e) {
    showError(e);
    $('password').select();
    if (e.status === 429 && e.retryAfter > 0) {
      lockout(e.retryAfter);
      return;
    }
  }
  button.disabled = false;
});

// The page's HTML keeps the button off until here: a form sent before this script ran would not
// reach the kiosk's sign-in.
button.disabled = false;
