// Marks a form's submit button busy after the first submit and swallows repeat
// clicks. A courtesy only: the server places one order whatever the browser sends.
// aria-disabled (not disabled) keeps the button focusable and announced.
// When a submit gets no answer of the shop's, it says what is known and its button
// asks the shop, from the form's token, whether the submit took effect.
(function () {
  "use strict";

  var FORMS = "form[data-submit-once]";
  var PENDING = "submit-once:pending";
  var RESTORE = "submit-once:restore";
  // What each submit sent, for the check: the same tokens and fields, where they went,
  // and the button pressed (a form may have two, each with its own token and address).
  var sent = new WeakMap();

  function button(form) {
    var last = sent.get(form);
    return (last && last.button) || form.querySelector("button[type=submit]");
  }

  // busyLabel: the label while busy (the button's own busy label when not given).
  function setBusy(form, busy, busyLabel) {
    var b = button(form);
    if (!b) return;
    var label = b.querySelector(".button-label");
    if (busy) {
      b.setAttribute("aria-disabled", "true");
      b.classList.add("is-busy");
      if (label && (busyLabel || b.dataset.busyLabel)) label.textContent = busyLabel || b.dataset.busyLabel;
    } else {
      b.removeAttribute("aria-disabled");
      b.classList.remove("is-busy");
      if (label && label.dataset.idleLabel) label.textContent = label.dataset.idleLabel;
    }
  }

  // What was sent, kept for this tab only until the next page loads: if the user
  // reloads while the POST is in flight, the browser drops the POST (the server
  // still places the order) and shows a blank form with a fresh token.
  function rememberSubmit(form, pressed) {
    try {
      sessionStorage.setItem(PENDING, JSON.stringify({
        path: location.pathname, fields: Array.from(new FormData(form, pressed)),
      }));
    } catch (e) { /* storage off or full: the server is still the guard */ }
  }

  // The copy is kept until the order's confirmation has actually been shown: a
  // confirmation link that then finds no order (lost in a database failover) can
  // still offer the details back. Putting them back into a form uses it up.
  function takeSaved() {
    try {
      var saved = JSON.parse(sessionStorage.getItem(PENDING));
      sessionStorage.removeItem(PENDING);
      sessionStorage.removeItem(RESTORE);
      return saved;
    } catch (e) { return null; }
  }

  function peekSaved() {
    try { return JSON.parse(sessionStorage.getItem(PENDING)); } catch (e) { return null; }
  }

  function fill(form, saved, withHidden) {
    saved.fields.forEach(function (pair) {
      var field = form.elements.namedItem(pair[0]);
      if (!field || !("value" in field)) return;
      if (field.type === "hidden" && !withHidden) return;
      field.value = pair[1];
    });
  }

  // On that reload, put back what was sent, token included: submitting it again
  // lands on the order it placed (or places it, if it never arrived), never twice.
  function restoreInterruptedSubmit(form) {
    var navigation = performance.getEntriesByType("navigation")[0];
    var saved = peekSaved();
    if (!saved || saved.path !== location.pathname) return;
    if (!navigation || navigation.type !== "reload") return;
    fill(form, takeSaved(), true);
    var notice = document.getElementById("interrupted-notice");
    if (notice) notice.hidden = false;
  }

  // "Could not confirm": the customer asked for the details back. They go into
  // this fresh form with its own fresh token, and nothing is sent until the
  // customer presses the button: never a silent second order.
  function restoreUnconfirmedOrder(form) {
    var wanted = false;
    try { wanted = sessionStorage.getItem(RESTORE) === "1"; } catch (e) { return; }
    var saved = wanted && peekSaved();
    if (!saved) return;
    fill(form, takeSaved(), false);
    var notice = document.getElementById("restored-notice");
    if (notice) notice.hidden = false;
  }

  function offerUnconfirmedDetails(offer) {
    if (!peekSaved()) return;
    offer.hidden = false;
    offer.querySelector("[data-restore-details]").addEventListener("click", function () {
      try { sessionStorage.setItem(RESTORE, "1"); } catch (e) { /* link still opens a form */ }
    });
  }

  // A reload or a back navigation refills what the user typed, but not hidden
  // inputs as the server sent them. One whose value a script has set is restored
  // like the typed fields, so the token stays the one those fields were sent with.
  function keepTokenWithFields() {
    document.querySelectorAll(FORMS + " input[type=hidden]").forEach(
      function (input) { input.value = input.value; });
  }

  // One notice of the form's (its words are in the form's template) is shown, the
  // others hidden; focused, so a keyboard or screen reader user meets it.
  function say(form, outcome, refusal) {
    var area = form.parentElement;
    area.querySelectorAll("[data-submit-notice]").forEach(function (notice) {
      notice.hidden = notice.dataset.submitNotice !== outcome;
    });
    var shown = area.querySelector("[data-submit-notice='" + outcome + "']");
    if (!shown) return;
    if (refusal) {  // the shop's own words when it sent some; the template's otherwise
      if (refusal.words) shown.querySelector("[data-refusal-words]").textContent = refusal.words;
      shown.querySelector("[data-refusal-status]").textContent = refusal.status;
    }
    shown.focus();
  }

  function ready(form) {
    delete form.dataset.submitted;
    delete form.dataset.unknown;
    setBusy(form, false);
  }

  // The submit may have taken effect: the button stays usable and asks the shop.
  function askMode(form) {
    delete form.dataset.submitted;
    form.dataset.unknown = "true";
    setBusy(form, false);
    var b = button(form), label = b && b.querySelector(".button-label");
    if (label && b.dataset.checkLabel) label.textContent = b.dataset.checkLabel;
  }

  // The shop's words from an error page of its own, or none.
  function refusalWords(html) {
    var page = new DOMParser().parseFromString(html || "", "text/html");
    return ["error-title", "error-description", "try-again"].map(function (id) {
      var part = page.getElementById(id);
      return part ? part.textContent.replace(/\s+/g, " ").trim().replace(/([^.!?])$/, "$1.") : "";
    }).filter(Boolean).join(" ");
  }

  // How long a submit or a check may go unanswered: the page's htmx timeout.
  function bound() { return (window.htmx && htmx.config.timeout) || 15000; }

  // The check: the same fields and tokens, to the same address, asking only whether
  // this token's submit took effect. The answer decides; anything else is no answer.
  function check(form, tries) {
    setBusy(form, true, button(form).dataset.checkingLabel);
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, bound());
    var last = sent.get(form) || {data: new FormData(form), action: form.action};
    fetch(last.action, {
      method: "POST", body: new URLSearchParams(last.data),
      headers: {"X-Submit-Once-Check": "1", "Accept": "application/json"},
      credentials: "same-origin", redirect: "manual", signal: controller.signal,
    }).then(function (response) {
      var json = /^application\/json/.test(response.headers.get("Content-Type") || "");
      return response.status === 200 && json ? response.json() : null;
    }).catch(function () { return null; }).then(function (answer) {
      clearTimeout(timer);
      settle(form, answer || {}, tries);
    });
  }

  function settle(form, answer, tries) {
    var there = answer.status === "done" && new URL(answer.location, location.href);
    if (there && there.origin === location.origin) {
      location.assign(there.href);  // stays busy until the result's page loads
    } else if (answer.status === "not_done") {
      takeSaved();  // nothing is in flight: a reload is not an interrupted submit
      ready(form);
      say(form, "not-done");
    } else {
      askMode(form);
      say(form, answer.status === "running" ? "running" : "still-unknown");
      // Still running: ask again shortly, a few times; the button asks at any time.
      if (answer.status === "running" && tries < 5) {
        setTimeout(function () { if (form.dataset.unknown) check(form, tries + 1); }, 2000);
      }
    }
  }

  // A submit while the outcome is unknown is the check, never sent to htmx.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches(FORMS) || !form.dataset.unknown) return;
    event.preventDefault();
    event.stopPropagation();
    if (button(form).getAttribute("aria-disabled") !== "true") check(form, 0);
  }, true);

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-submit-once")) return;
    if (form.dataset.submitted === "true") {
      event.preventDefault();
      return;
    }
    form.dataset.submitted = "true";
    var pressed = event.submitter && event.submitter.form === form ? event.submitter : null;
    sent.set(form, {data: new FormData(form, pressed), button: pressed,
                    // formAction is the page's own URL when the button has no formaction
                    action: pressed && pressed.hasAttribute("formaction") ? pressed.formAction
                                                                           : form.action});
    rememberSubmit(form, pressed);
    setBusy(form, true);
  });

  function submitOf(event) {
    var form = event.detail && event.detail.elt;
    return form && form.matches && form.matches(FORMS) ? form : null;
  }

  // htmx posts the order and refund forms. An answer of the shop's is HX-Redirect (the
  // result), the form's area again (with the server's message), HX-Refresh (the page's
  // GET says what happened) or an error page saying why the submit was refused (4xx).
  // Anything else (a proxy's 502/503/504, another status, a page without the form)
  // leaves the outcome unknown, as does no answer at all (timeout, network error).
  document.addEventListener("htmx:beforeOnLoad", function (event) {
    var form = submitOf(event), xhr = event.detail.xhr, target = event.detail.target;
    if (!form || xhr.getResponseHeader("HX-Redirect")) return;
    if (xhr.getResponseHeader("HX-Refresh") === "true") { takeSaved(); return; }
    var html = xhr.responseText || "";
    if (target && target.id && html.indexOf('id="' + target.id + '"') !== -1) return;
    event.preventDefault();
    if (xhr.status >= 400 && xhr.status < 500) {
      takeSaved();  // refused: nothing took effect, a reload must not say otherwise
      ready(form);
      say(form, "refused", {words: refusalWords(html), status: String(xhr.status)});
    } else {
      askMode(form);
      say(form, "unknown");
    }
  });

  ["htmx:sendError", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, function (event) {
      var form = submitOf(event);
      if (!form) return;
      askMode(form);
      say(form, "unknown");
    });
  });

  // Restored from the back-forward cache: the form is usable again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll(FORMS).forEach(ready);
  });

  // htmx swapped the form in again (its errors, or "already used"): move to what the
  // customer must read, as a full page load would.
  document.addEventListener("htmx:afterSwap", function () {
    var summary = document.querySelector("[data-autofocus]") ||
      document.getElementById("form-message");
    if (summary) {
      if (!summary.hasAttribute("tabindex")) summary.setAttribute("tabindex", "-1");
      summary.focus();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".button-label").forEach(function (label) {
      label.dataset.idleLabel = label.textContent;
    });
    keepTokenWithFields();
    var form = document.querySelector(FORMS);
    var offer = document.getElementById("restore-offer");
    if (document.querySelector("[data-order-confirmed]")) {
      takeSaved();  // the order is shown: the copy has done its job
    } else if (offer) {
      offerUnconfirmedDetails(offer);
    } else if (form) {
      restoreUnconfirmedOrder(form);
      restoreInterruptedSubmit(form);
    }
    var summary = document.querySelector("[data-autofocus]");
    if (summary) summary.focus();
  });
})();
