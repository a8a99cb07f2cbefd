// Marks a form's submit button busy after the first submit and swallows repeat
// clicks. A courtesy only: the server places one order whatever the browser sends.
// aria-disabled (not disabled) keeps the button focusable and announced.
(function () {
  "use strict";

  function markBusy(form) {
    var button = form.querySelector("button[type=submit]");
    if (!button) return;
    button.setAttribute("aria-disabled", "true");
    button.classList.add("is-busy");
    var label = button.querySelector(".button-label");
    if (label && button.dataset.busyLabel) label.textContent = button.dataset.busyLabel;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-submit-once")) return;
    if (form.dataset.submitted === "true") {
      event.preventDefault();
      return;
    }
    form.dataset.submitted = "true";
    markBusy(form);
  });

  // Restored from the back-forward cache: the form is usable again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll("form[data-submit-once]").forEach(function (form) {
      delete form.dataset.submitted;
      var button = form.querySelector("button[type=submit]");
      if (!button) return;
      button.removeAttribute("aria-disabled");
      button.classList.remove("is-busy");
      var label = button.querySelector(".button-label");
      if (label) label.textContent = label.dataset.idleLabel || label.textContent;
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".button-label").forEach(function (label) {
      label.dataset.idleLabel = label.textContent;
    });
    var summary = document.querySelector("[data-autofocus]");
    if (summary) summary.focus();
  });
})();
