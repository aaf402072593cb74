// The console's login form: POST the password as JSON; the answer sets the session cookie.
"use strict";
document.getElementById("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("login-error");
  error.textContent = "";
  const password = document.getElementById("password").value;
  try {
    const answer = await fetch("/console/api/login", {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({password}),
    });
    if (answer.ok) {
      location.href = "/console";
      return;
    }
    const body = await answer.json().catch(() => ({}));
    error.textContent = body.message || `login failed (${answer.status})`;
  } catch (e) {
    error.textContent = `the gateway does not answer: ${e}`;
  }
});
