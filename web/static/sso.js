// Single sign-on for the console: the authorization code flow with PKCE
// (RFC 7636) with the server's OpenID Connect provider. The browser holds
// the verifier; purser's server trades the code for the ID token
// (POST /api/v1/auth/token), so that neither the provider's CORS nor the
// console's own policy on connections matters. The ID token then is the
// bearer token, as a pasted one is.
"use strict";

const sso = (function () {
  const KEY = "purser-sso";

  function b64url(bytes) {
    let s = "";
    for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function random(n) { return b64url(crypto.getRandomValues(new Uint8Array(n))); }
  function redirectURI() { return location.origin + location.pathname; }

  // settings is the provider of the server, or null.
  async function settings() {
    try {
      const resp = await fetch("/api/v1/auth/config", { headers: { "Accept": "application/json" } });
      if (!resp.ok) return null;
      const cfg = await resp.json();
      return cfg.oidc && cfg.oidc.authorizationEndpoint ? cfg.oidc : null;
    } catch (e) {
      return null;
    }
  }

  // begin sends the browser to the provider.
  async function begin(oidc) {
    const verifier = random(32);
    const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    const state = random(16);
    sessionStorage.setItem(KEY, JSON.stringify({ verifier, state, redirect: redirectURI(), hash: location.hash }));
    const scopes = oidc.scopes.filter(s => s !== "offline_access");
    const q = new URLSearchParams({
      response_type: "code", client_id: oidc.clientID, redirect_uri: redirectURI(), scope: scopes.join(" "),
      state, code_challenge: challenge, code_challenge_method: "S256",
    });
    location.assign(oidc.authorizationEndpoint + (oidc.authorizationEndpoint.includes("?") ? "&" : "?") + q);
  }

  // complete finishes a sign-in the provider sent the browser back from:
  // true when it stored a token, false when this page load is no return.
  async function complete() {
    const p = new URLSearchParams(location.search);
    if (!p.has("code") && !p.has("error")) return false;
    const saved = JSON.parse(sessionStorage.getItem(KEY) || "null");
    sessionStorage.removeItem(KEY);
    history.replaceState(null, "", location.pathname + (saved && saved.hash ? saved.hash : location.hash));
    if (p.has("error")) throw new Error("The provider refused the sign-in: " + (p.get("error_description") || p.get("error")));
    if (!saved || p.get("state") !== saved.state) throw new Error("This sign-in was not started from this page; sign in again.");
    const resp = await fetch("/api/v1/auth/token", {
      method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify({ code: p.get("code"), codeVerifier: saved.verifier, redirectURI: saved.redirect }),
    });
    const body = await resp.json().catch(() => ({}));
    if (!resp.ok || !body.idToken) throw new Error("The sign-in was not accepted: " + (body.message || resp.status));
    sessionStorage.setItem("purser-token", body.idToken);
    return true;
  }

  return { settings, begin, complete };
})();
