// continue.js - the gate of `diagport ui`: the small page the server answers, without the cookie, for a
// link to a view followed from another site (a chat, a webmail). The cookie is SameSite=Strict, so such a
// navigation comes without it; a navigation this page starts is same-site and brings it. So: point the
// link at the view (the fragment is the view and never reaches the server) and follow it once by itself.
// The link is /?continue#VIEW, not /#VIEW: from /#VIEW, /#VIEW is the same document (a fragment change, no
// request); app.js takes ?continue out of the address bar.
// If this page comes back (no cookie in this browser at all: the printed URL was never opened here), it
// does not loop: sessionStorage says it already tried, and the page says what to do. The app's page clears
// the mark once it loads. No data and no request of its own: it is served without the cookie.
const KEY = 'diagport-continue';
const link = document.getElementById('continue');
const to = '/?continue' + location.hash;
if (link) link.href = to;
let tried = true;
try {
  tried = sessionStorage.getItem(KEY) === to;
  if (!tried) sessionStorage.setItem(KEY, to);
} catch { /* no storage: do not risk a loop, leave the link */ }
if (!tried) {
  location.replace(to);
} else {
  const p = document.createElement('p');
  p.id = 'gate-why';
  p.textContent = 'This browser has no session with diagport ui yet: open the URL diagport ui printed (with its secret) in this browser first, then this link again.';
  (document.querySelector('main.gate') || document.body).appendChild(p);
}
