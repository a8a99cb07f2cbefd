// Marks a form's submit button busy after the first submit and swallows repeat
// clicks. A courtesy only: the server places one order whatever the browser sends.
// aria-disabled (not disabled) keeps the button focusable and announced.
(function () {
  "use strict";

  var FORMS = "form[data-submit-once]";
  var PENDING = "submit-once:pending";

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

  // On that reload, put back what was sent, token included: submitting it again
  // lands on the order it placed (or places it, if it never arrived), never twice.
  function restoreInterruptedSubmit() {
    var saved = null;
    try {
      saved = JSON.parse(sessionStorage.getItem(PENDING));
      sessionStorage.removeItem(PENDING);
    } catch (e) { return; }
    var navigation = performance.getEntriesByType("navigation")[0];
    var form = document.querySelector(FORMS);
    if (!saved || !form || saved.path !== location.pathname) return;
    if (!navigation || navigation.type !== "reload") return;
    saved.fields.forEach(function (pair) {
      var field = form.elements.namedItem(pair[0]);
      if (field && "value" in field) field.value = pair[1];
    });
    var notice = document.getElementById("interrupted-notice");
    if (notice) notice.hidden = false;
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

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".button-label").forEach(function (label) {
      label.dataset.idleLabel = label.textContent;
    });
    keepTokenWithFields();
    restoreInterruptedSubmit();
    var summary = document.querySelector("[data-autofocus]");
    if (summary) summary.focus();
  });
})();
