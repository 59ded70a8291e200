// The admin token lives in sessionStorage: it survives a reload of this tab, not the browser.
const KEY = "clawgate.console.token";

/**
 * The token from the address's #token= fragment (taken once, then removed from the address bar
 * and history so it is not bookmarked or shared), else the one this tab kept.
 */
export function initialToken() {
  const match = /(?:^#|&)token=([^&]*)/.exec(window.location.hash);
  if (match !== null) {
    const token = decodeURIComponent(match[1]);
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    if (token !== "") {
      keepToken(token);
      return token;
    }
  }
  return sessionStorage.getItem(KEY) ?? "";
}

export function keepToken(token) {
  sessionStorage.setItem(KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
}
