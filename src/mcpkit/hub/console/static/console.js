// mcpkit hub console: progressive enhancement only (every page works without this file).
// A form submits with fetch; the answer's <main> replaces the page's (no reload), the
// address follows a redirect, the button shows a loading state, and a network failure is
// shown in the page. Forms marked data-enhance="off" (sign-out, Connect: they leave the
// console) submit as usual.
"use strict";

(() => {
  const main = () => document.getElementById("main");

  function busy(button, on) {
    if (!button) return;
    if (on) {
      button.dataset.label = button.innerHTML;  // its own server-rendered markup
      button.setAttribute("aria-busy", "true");
      button.disabled = true;
      if (button.dataset.busy) button.textContent = button.dataset.busy;
    } else {
      button.removeAttribute("aria-busy");
      button.disabled = false;
      if (button.dataset.label) button.innerHTML = button.dataset.label;
    }
  }

  function showFailure(form, message) {
    let alert = form.querySelector(".alert.network");
    if (!alert) {
      alert = document.createElement("p");
      alert.className = "alert error network";
      alert.setAttribute("role", "alert");
      form.prepend(alert);
    }
    alert.textContent = message;
  }

  function swap(html, url, redirected) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const next = doc.getElementById("main");
    if (!next || !next.hasAttribute("data-console")) return false;
    main().replaceWith(next);
    document.title = doc.title;
    if (redirected) history.pushState({}, "", url);
    const focus = next.querySelector("[role=alert], [role=status]") || next;
    if (focus === next) next.focus(); else { focus.tabIndex = -1; focus.focus(); }
    return true;
  }

  // "Try a tool" (data-enhance="stream"): the answer is NDJSON - progress lines while the
  // tool runs, then the outcome's HTML (rendered and escaped by the hub) - unless the form
  // comes back with errors (an HTML page, swapped in as any form's). "Stop" aborts the
  // request, which cancels the call.
  async function streamCall(form, button) {
    const status = document.getElementById("try-status");
    const bar = status.querySelector("progress");
    const text = status.querySelector(".progress-text");
    const stop = form.querySelector("[data-stop]");
    const controller = new AbortController();
    bar.removeAttribute("value");
    bar.removeAttribute("max");
    text.textContent = "Calling the tool…";
    status.hidden = false;
    stop.hidden = false;
    stop.onclick = () => controller.abort();
    let ended = false;
    const handle = (event) => {
      if ("progress" in event) {
        if (typeof event.total === "number" && event.total > 0) {
          bar.max = event.total;
          bar.value = Math.min(event.progress ?? 0, event.total);
        }
        const count = event.total ? `${event.progress} of ${event.total}` : `${event.progress}`;
        text.textContent = event.message ? `${event.message} (${count})` : `Progress: ${count}`;
      }
      if ("html" in event) {
        ended = true;
        if (event.signed_out) {
          location.assign("/console/sign-in?next=" + encodeURIComponent(location.pathname +
            location.search));
          return;
        }
        const doc = new DOMParser().parseFromString(event.html, "text/html");
        const result = doc.getElementById("try-result");
        if (result) {
          document.getElementById("try-result").replaceWith(result);
          result.focus();
        }
        status.hidden = true;
      }
    };
    try {
      const response = await fetch(form.action, {
        method: "POST", body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin", redirect: "follow", signal: controller.signal,
        headers: { Accept: "application/x-ndjson" },
      });
      if (!(response.headers.get("content-type") || "").startsWith("application/x-ndjson")) {
        const html = await response.text();
        if (new URL(response.url).origin !== location.origin ||
            !swap(html, response.url, response.redirected)) location.assign(response.url);
        return;
      }
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          if (line) handle(JSON.parse(line));
        }
      }
      if (!ended) text.textContent = "The call ended without an answer. Try again.";
    } catch (error) {
      text.textContent = error.name === "AbortError" ? "Stopped: the call was cancelled."
        : "The hub could not be reached. Check your connection and try again.";
    } finally {
      busy(button, false);
      stop.hidden = true;
    }
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || form.dataset.enhance === "off") return;
    if (form.method.toLowerCase() !== "post") return;
    event.preventDefault();
    const button = event.submitter || form.querySelector("button[type=submit]");
    busy(button, true);
    if (form.dataset.enhance === "stream") return streamCall(form, button);
    try {
      const response = await fetch(form.action, {
        method: "POST", body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin", redirect: "follow",
      });
      const url = new URL(response.url);
      const html = await response.text();
      if (url.origin !== location.origin || !swap(html, response.url, response.redirected)) {
        location.assign(response.url);  // not a console page (the sign-in page, say)
      }
    } catch (error) {
      busy(button, false);
      showFailure(form, "The hub could not be reached. Check your connection and try again.");
    }
  });

  // A button data-copy="ID" copies the text of the element ID (a secret shown once, a
  // snippet); without a clipboard (plain http, old browser) the text is selected instead.
  document.addEventListener("click", async (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-copy]")
      : null;
    const source = button && document.getElementById(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent);
      button.dataset.copied = "";
    } catch (error) {
      getSelection().selectAllChildren(source);
    }
  });

  window.addEventListener("popstate", () => location.reload());
})();
