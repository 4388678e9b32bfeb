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

  // Turns and lines arrive as out-of-band fragments that replace the element with their id, from
  // the event stream and from the POST that sent a message, in either order. One not on the page
  // yet gets a place first: a first reply right under the message it answers, a message above a
  // reply that came before it, anything else at the end. So nothing shows twice or out of order.
  function place(el) {
    var log = document.getElementById("messages");
    if (!log || !el.id || document.getElementById(el.id)) return;
    var spot = document.createElement("div");
    spot.id = el.id;
    var answers = el.getAttribute("data-answers");
    var asked = answers && document.getElementById("message-" + answers);
    var reply = el.id.indexOf("message-") === 0 &&
      log.querySelector('[data-answers="' + el.id.slice("message-".length) + '"]');
    if (asked) asked.after(spot);
    else if (reply) reply.before(spot);
    else log.appendChild(spot);
  }

  function makeRoom(html) {
    if (typeof html !== "string" || html.indexOf("hx-swap-oob") < 0) return;
    var parsed = document.createElement("template");
    parsed.innerHTML = html;
    parsed.content.querySelectorAll('[hx-swap-oob="true"]').forEach(function (el) {
      if (/^(turn|message)-/.test(el.id)) place(el);
    });
  }
  document.addEventListener("htmx:sseBeforeMessage", function (event) { makeRoom(event.detail.data); });
  document.addEventListener("htmx:beforeSwap", function (event) { makeRoom(event.detail.serverResponse); });

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
