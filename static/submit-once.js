// Marks a form's submit button busy after the first submit and swallows repeat
// clicks. A courtesy only: the server places one order whatever the browser sends.
// aria-disabled (not disabled) keeps the button focusable and announced.
(function () {
  "use strict";

  var FORMS = "form[data-submit-once]";
  var PENDING = "submit-once:pending";
  var RESTORE = "submit-once:restore";

  function setBusy(form, busy) {
    var button = form.querySelector("button[type=submit]");
    if (!button) return;
    var label = button.querySelector(".button-label");
    if (busy) {
      button.setAttribute("aria-disabled", "true");
      button.classList.add("is-busy");
      if (label && button.dataset.busyLabel) label.textContent = button.dataset.busyLabel;
    } else {
      button.removeAttribute("aria-disabled");
      button.classList.remove("is-busy");
      if (label && label.dataset.idleLabel) label.textContent = label.dataset.idleLabel;
    }
  }

  // What was sent, kept for this tab only until the next page loads: if the user
  // reloads while the POST is in flight, the browser drops the POST (the server
  // still places the order) and shows a blank form with a fresh token.
  function rememberSubmit(form) {
    try {
      sessionStorage.setItem(PENDING, JSON.stringify({
        path: location.pathname, fields: Array.from(new FormData(form)),
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

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-submit-once")) return;
    if (form.dataset.submitted === "true") {
      event.preventDefault();
      return;
    }
    form.dataset.submitted = "true";
    rememberSubmit(form);
    setBusy(form, true);
  });

  // Restored from the back-forward cache: the form is usable again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll(FORMS).forEach(function (form) {
      delete form.dataset.submitted;
      setBusy(form, false);
    });
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
