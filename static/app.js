// Small behaviours the markup cannot say: clear the composer, keep the newest message
// in view, and count down a card's time left. No inline script (CSP).
(function () {
  "use strict";

  function scrollToEnd() {
    var log = document.getElementById("messages");
    if (log) log.scrollTop = log.scrollHeight;
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    // Only a message the server kept clears the box: a refused one (too long, …) stays to be fixed.
    if (form && form.id === "composer" && event.detail.successful && event.detail.xhr.status < 300) {
      form.reset();
      form.querySelector("textarea").focus();
    }
  });
  document.addEventListener("htmx:afterSettle", scrollToEnd);
  document.addEventListener("htmx:sseMessage", scrollToEnd);

  // A turn's live reply arrives as an out-of-band fragment that replaces its group by id; a
  // group not on the page yet (a new turn) is added at the end of the chat instead.
  document.addEventListener("htmx:oobErrorNoTarget", function (event) {
    var content = event.detail.content;
    var log = document.getElementById("messages");
    if (log && content && content.id && content.id.indexOf("turn-") === 0) {
      log.appendChild(content);
      window.htmx.process(content);
      scrollToEnd();
    }
  });
  document.addEventListener("DOMContentLoaded", scrollToEnd);

  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (box && box.id === "text" && event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      box.form.requestSubmit();
    }
  });

  function tick() {
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.max(0, Math.round((Date.parse(el.dataset.expires) - Date.now()) / 1000));
      el.textContent = left > 0 ? Math.floor(left / 60) + " min " + (left % 60) + " s left" : "Expired";
    });
  }
  setInterval(tick, 1000);
})();
