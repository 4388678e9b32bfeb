// Small behaviours the markup cannot say: clear the composer, keep the newest message
// in view, move focus to a decided card's outcome, and count down a card's time left. No inline script (CSP).
(function () {
  "use strict";

  // The chat follows what is written (a streaming reply, a card, a notice) while the person is at
  // its end; once they scroll up to read, it stays where they are and offers "New words below".
  var following = true;
  var endTop = 0;  // where the log's end was when it was last followed there
  function atEnd(log) { return log.scrollHeight - log.scrollTop - log.clientHeight < 40; }
  function below() { return document.getElementById("new-words"); }
  function scrollToEnd() {
    var log = document.getElementById("messages");
    if (!log) return;
    log.scrollTop = log.scrollHeight;
    endTop = log.scrollTop;
    following = true;
    shown(false);
  }
  function shown(yes) {
    var button = below();
    if (!button || button.classList.contains("new-words--quiet") !== yes) return;
    button.classList.toggle("new-words--quiet", !yes);
    button.textContent = yes ? "New words below ↓" : "Jump to the latest message";
  }
  function grown() {
    var log = document.getElementById("messages");
    if (!log) return;
    // A scroll up whose event is not yet dispatched (scroll events wait for the next frame, new
    // words do not) already counts: the person has left the end, and is not pulled back to it.
    if (following && log.scrollTop < endTop - 1 && !atEnd(log)) following = false;
    if (following) scrollToEnd();
    else if (!atEnd(log)) shown(true);
  }
  function watch() {
    var log = document.getElementById("messages");
    if (!log) return;
    log.addEventListener("scroll", function () {
      following = atEnd(log);
      if (following) { endTop = log.scrollTop; shown(false); }
    });
    new MutationObserver(function (records) {
      // A card's clock ticking (its time left, each second) or a button's own label ("Copied") is
      // nothing new to follow: it would pull the log to its end under the person's pointer (the
      // last card's Edit just opened, say), or offer "New words below" when none came.
      if (!records.every(incidental)) grown();
    }).observe(log, { childList: true, subtree: true, characterData: true });
    scrollToEnd();
  }
  function incidental(record) {
    var el = record.target.nodeType === 1 ? record.target : record.target.parentElement;
    return !!(el && el.closest("[data-expires], button"));
  }
  document.addEventListener("DOMContentLoaded", watch);
  document.addEventListener("click", function (event) {
    if (!(event.target.closest && event.target.closest("#new-words"))) return;
    // Reading goes on in the log: the button (shown while it has focus) leaves the layout now, not
    // at the person's next press, where the place it gave back moved the log's end 48 px between
    // press and release and the click landed on nothing.
    var log = document.getElementById("messages");
    if (log) log.focus({ preventScroll: true });
    scrollToEnd();
  });

  var sent = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "composer") {
      sent = form.querySelector("textarea").value;
      scrollToEnd();  // the person's own message: back to the end, to see it and its reply
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    // Only a message the server kept clears the box: a refused one (too long, …) stays to be fixed,
    // and so do words typed since it was sent (the reply can stream in before the POST returns).
    if (form && form.id === "composer" && event.detail.successful && event.detail.xhr.status < 300) {
      var box = form.querySelector("textarea");
      if (box.value === sent) form.reset();
      // Back to the composer, unless the person has moved on meanwhile (typing a search, say):
      // their focus, and the key they press next, stay where they are.
      var here = document.activeElement;
      if (!here || here === document.body || form.contains(here)) box.focus();
    }
  });

  // Every rule below reads an element's classes: base.html's htmx config settles no attributes, so a
  // swapped element has its own at once (htmx's default lends it the old one's until it settles,
  // 20 ms or, on a busy machine, much longer: a live bubble then looked like the place it took).
  // Turns and lines arrive as out-of-band fragments that replace the element with their id, from
  // the event stream and from the POST that sent a message, in either order. One not on the page
  // yet gets a place first: a first reply right under the message it answers, a message above a
  // reply that came before it, anything else at the end. So nothing shows twice or out of order.
  function place(el) {
    var log = document.getElementById("messages");
    if (!log || !el.id || document.getElementById(el.id)) return;
    var spot = document.createElement("div");
    spot.id = el.id;
    var replaced = el.getAttribute("data-replaces");  // a fresh card: where the card it replaces is
    var old = replaced && document.getElementById("approval-" + replaced);
    if (old) { old.after(spot); return; }
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
      if (/^(turn|message)-/.test(el.id) || el.hasAttribute("data-replaces")) place(el);
    });
  }
  document.addEventListener("htmx:sseBeforeMessage", function (event) { makeRoom(event.detail.data); });
  document.addEventListener("htmx:beforeSwap", function (event) { makeRoom(event.detail.serverResponse); });

  // A turn's live bubble sent with the accepted message (data-waiting) only takes an empty place:
  // the turn's own bubble, its words or its messages may have come first over the events. A live
  // bubble never replaces one already there (it would drop the words shown so far), nor a turn
  // the page already shows with its words or cards (the POST's answer can bring a turn's end
  // before a late stream replays its start). A turn that shows only a note takes it: a failed or
  // interrupted pass, which Retry runs again in the same place (after a reload too, when its
  // note no longer offers Retry).
  // And a person's message never changes: its copy (a turn's start brings the message it
  // answers) leaves the one on the page as it is, with what the person does there (a "Copied").
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target, fragment = event.detail.fragment;
    if (!target || !fragment || !target.classList) return;
    var copy = document.createElement("div");
    copy.appendChild(fragment.cloneNode(true));
    var incoming = copy.firstElementChild;
    if (!incoming) return;
    if (target.matches(".message--user") && incoming.id === target.id) {
      event.detail.shouldSwap = false;
      return;
    }
    if (!incoming.classList.contains("turn--live") || !target.classList.contains("turn")) return;
    var again = !target.classList.contains("turn--live") && !incoming.hasAttribute("data-waiting") &&
      !target.querySelector(".message--assistant, .card");
    if (!again) event.detail.shouldSwap = false;
  });

  // The same turn can arrive twice (the POST's answer and the event stream), and a card with it.
  // A copy of a card that says nothing new never replaces the one on the page: a copy still
  // waiting (the page's, if it waits too, is the person's work in progress: what they typed,
  // where their focus is; if it is decided, the copy is stale: a decision is never undone), or a
  // copy of the same decision (the page's may hold the focus on its outcome). A turn's copy takes
  // the page's card in its place; a moved element loses the focus, so the element that had it (a
  // Confirm button, a field with its caret, an outcome) gets it back once the turn is swapped in.
  // (htmx's own classes are left out: for 20 ms after a swap the page's card still carries
  // htmx-added and htmx-settling, and a copy of the same decision can arrive then.)
  function saysNothingNew(card, copy) {
    var words = function (element) { return element.textContent.replace(/\s+/g, " ").trim(); };
    var own = function (element) {
      return Array.prototype.filter.call(element.classList, function (name) { return name.indexOf("htmx-") !== 0; }).join(" ");
    };
    return copy.matches(".card--pending") || (own(copy) === own(card) && words(copy) === words(card));
  }
  var focusInMovedCard = null;
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target, fragment = event.detail.fragment;
    if (!target || !fragment || !fragment.querySelector || event.detail.shouldSwap === false) return;
    if (target.matches(".card[data-approval]")) return;  // the card itself: below
    var cards = Array.prototype.slice.call(target.querySelectorAll(".card[data-approval]"));
    cards.forEach(function (card) {
      var again = fragment.querySelector("#" + CSS.escape(card.id));
      if (again && !saysNothingNew(card, again)) noteDecidedUnderFocus(card);
      if (!again || !saysNothingNew(card, again)) return;
      var active = document.activeElement;
      if (active && card.contains(active)) {
        focusInMovedCard = { element: active, start: active.selectionStart, end: active.selectionEnd };
      }
      again.replaceWith(card);
    });
  });
  document.addEventListener("htmx:oobAfterSwap", function () {
    var moved = focusInMovedCard;
    focusInMovedCard = null;
    // Only a focus the move took: one the person has since put elsewhere stays where it is.
    var lost = !document.activeElement || document.activeElement === document.body;
    if (!moved || !lost || !moved.element.isConnected) return;
    moved.element.focus({ preventScroll: true });
    if (typeof moved.start === "number" && moved.element.setSelectionRange) {
      moved.element.setSelectionRange(moved.start, moved.end);
    }
  });

  // After the person answers a card, focus goes to what happened (its outcome, or the error), and
  // a screen reader hears it: the card is replaced whole, so the page's own live region says it.
  var answering = null;
  // What the live region says of a decided card: "Removed (done). Confirmed by you, …", or its error.
  function spoken(card, outcome) {
    var label = outcome.querySelector(".card__label"), badge = outcome.querySelector(".badge");
    var by = card.querySelector(".card__decided");
    if (!label || !badge) return outcome.textContent.trim();
    return label.textContent.trim() + " (" + badge.textContent.trim() + ")" + (by ? ". " + by.textContent.trim() : "");
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    var card = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest(".card[data-approval]");
    if (card) answering = card.id;
  });
  document.addEventListener("htmx:afterSettle", function () {
    var card = answering && document.getElementById(answering);
    var outcome = card && card.querySelector(".card__outcome, .card__error");
    if (!outcome) return;
    answering = null;
    outcome.setAttribute("tabindex", "-1");
    outcome.focus();
    var said = document.getElementById("card-said");
    if (said) said.textContent = spoken(card, outcome);
  });

  // A card's change from the event stream (someone decided it, here or anywhere) replaces the card,
  // but not while this page's own answer to it is on its way (that answer's reply brings the news,
  // and an error it says stays), and not when it says nothing new (above). Nothing of the page is
  // moved: a swap called off later loses nothing.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target, fragment = event.detail.fragment;
    if (!target || !fragment || !target.matches || !target.matches(".card[data-approval]")) return;
    var copy = document.createElement("div");
    copy.appendChild(fragment.cloneNode(true));
    var incoming = copy.querySelector("#" + CSS.escape(target.id));
    if (target.querySelector(".htmx-request") || (incoming && saysNothingNew(target, incoming))) {
      event.detail.shouldSwap = false;
    } else {
      noteDecidedUnderFocus(target);
    }
  });

  // A card decided elsewhere (another tab, an admin, a chat) while the person's focus is on it:
  // the buttons it was on are gone, so the focus goes to its outcome and the page's live region
  // says what happened, as after an answer given here.
  var decidedUnderFocus = null;
  function noteDecidedUnderFocus(card) {
    var active = document.activeElement;
    if (active && active !== document.body && card.contains(active)) decidedUnderFocus = card.id;
  }
  document.addEventListener("htmx:oobAfterSwap", function () {
    var id = decidedUnderFocus;
    decidedUnderFocus = null;
    var card = id && document.getElementById(id);
    var outcome = card && card.querySelector(".card__outcome, .card__error");
    var lost = !document.activeElement || document.activeElement === document.body;
    if (!outcome || !lost) return;
    outcome.setAttribute("tabindex", "-1");
    outcome.focus({ preventScroll: true });
    var said = document.getElementById("card-said");
    if (said) said.textContent = spoken(card, outcome);
  });

  // The console's poll waits while the admin writes in its queue (a decline's reason): its answer
  // may send the queue again, which would take what they typed with it.
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!event.detail.elt || event.detail.elt.id !== "admin-stats") return;
    var queue = document.getElementById("countersign-queue");
    if (!queue) return;
    var typed = Array.prototype.some.call(queue.querySelectorAll("textarea"), function (t) { return t.value.trim() !== ""; });
    var writing = queue.contains(document.activeElement) && document.activeElement.matches("textarea, input");
    if (typed || writing || queueAnswering) event.preventDefault();
  });

  // An answer given in the queue wins over the poll: a poll asked before the answer may read the
  // queue from before it, and its late reply would put the decided card back with its buttons, or
  // take away the card the answer is about to fill in. So no poll goes while an answer is on its
  // way, and a poll's reply is dropped when an answer was sent after the poll was.
  var queueAnswering = 0, queueAnswers = 0;
  function inQueue(elt) {
    var queue = document.getElementById("countersign-queue");
    return !!(elt && queue && elt.id !== "admin-stats" && queue.contains(elt));
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.defaultPrevented) return;
    if (inQueue(event.detail.elt)) { queueAnswering++; queueAnswers++; event.detail.xhr.inQueue = true; }
    else if (event.detail.elt && event.detail.elt.id === "admin-stats") event.detail.xhr.answersBefore = queueAnswers;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.xhr && event.detail.xhr.inQueue) { event.detail.xhr.inQueue = false; queueAnswering--; }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var before = event.detail.xhr && event.detail.xhr.answersBefore;
    if (before !== undefined && before !== queueAnswers) event.detail.shouldSwap = false;
  });

  // Enter sends, Shift+Enter is a new line; an Enter that ends an IME composition (Japanese,
  // Chinese, …) only commits the composed text.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (box && box.id === "text" && event.key === "Enter" && !event.shiftKey &&
        !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      box.form.requestSubmit();
    }
  });

  // A code block's Copy button (app.markdown writes it): copies the code as text, never as HTML.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".code-copy");
    var code = button && button.parentElement.querySelector("pre code");
    if (!code) return;
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(code.textContent).then(
        function () { told(button, "Copied", "Copy code"); },
        function () { told(button, "Copy failed", "Copy code"); }
      );
    } else {
      told(button, "Copy failed", "Copy code");
    }
  });
  // A Copy button's label says what happened until the pointer or the focus moves on.
  function told(button, word, label) {
    button.textContent = word;
    var back = function () { button.textContent = label; };
    button.addEventListener("mouseleave", back, { once: true });
    button.addEventListener("blur", back, { once: true });
  }

  // The live updates' health, told to the person: a stream ends now and then and reconnects (one
  // error, then open again), but one that fails again before it has stayed open STEADY_MS is lost
  // (Redis or the server away: the page no longer follows), and the notice says so until a stream
  // has stayed open that long. What happened meanwhile comes with the reconnected stream.
  // An event that comes is as good a sign as a stream that stays open.
  var STEADY_MS = 3000;
  var failures = 0, steady = null;
  function live() {
    clearTimeout(steady);
    failures = 0;
    var lost = document.getElementById("live-lost");
    if (lost) lost.hidden = true;
  }
  document.addEventListener("htmx:sseError", function () {
    clearTimeout(steady);
    failures += 1;
    var lost = document.getElementById("live-lost");
    if (lost && failures >= 2) lost.hidden = false;
  });
  document.addEventListener("htmx:sseOpen", function () {
    clearTimeout(steady);
    steady = setTimeout(live, STEADY_MS);
  });
  document.addEventListener("htmx:sseMessage", live);

  // A 5xx answer of ours carries its note (partials/_error.html), which htmx does not swap in (a
  // proxy's error page must never land in the chat): the chat shows ours at its end, so a Stop
  // refused while Redis is away, or a message the database could not keep, says so. A Stop's note
  // lasts while it is true: until Stop is pressed again or no reply is live any more.
  function dropStopNotes() {
    document.querySelectorAll("#messages .message--error[data-stop-note]").forEach(function (el) { el.remove(); });
  }
  document.addEventListener("htmx:responseError", function (event) {
    var log = document.getElementById("messages");
    var xhr = event.detail.xhr;
    if (!log || !xhr || xhr.status < 500) return;
    var parsed = document.createElement("template");
    parsed.innerHTML = xhr.responseText;
    var note = parsed.content.querySelector(".message--error");
    if (!note) return;
    var stop = event.detail.elt && event.detail.elt.classList && event.detail.elt.classList.contains("stop");
    if (stop) { dropStopNotes(); note.setAttribute("data-stop-note", ""); }
    log.appendChild(note);
    scrollToEnd();
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.classList && elt.classList.contains("stop")) dropStopNotes();
  });
  document.addEventListener("htmx:sseMessage", function () {
    if (!document.querySelector("#messages .turn--live")) dropStopNotes();
  });

  // A message's time is written in UTC by the server; shown here in the person's own time zone
  // (the UTC value stays in the tooltip and in datetime).
  var clock = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  function localTimes() {
    document.querySelectorAll(".message__meta time[datetime]:not([data-local])").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      el.title = el.textContent;
      el.textContent = clock.format(when);
      el.setAttribute("data-local", "");
    });
  }
  document.addEventListener("DOMContentLoaded", localTimes);
  document.addEventListener("htmx:afterSettle", localTimes);
  document.addEventListener("htmx:sseMessage", localTimes);
  // A title event (the first message, or a rename, here or in another tab) retitles the heading
  // and the list out of band; the tab's title follows the heading.
  document.addEventListener("htmx:sseMessage", function () {
    var heading = document.getElementById("conversation-title");
    var title = heading && heading.textContent.trim() + " · Countersign";
    if (title && document.title !== title) document.title = title;
  });

  // Copy on a message: its words as shown, without the "You:"/"Assistant:" label or its buttons.
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    area.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    var message = button && button.closest(".message");
    if (!message) return;
    var words = message.cloneNode(true);
    words.querySelectorAll(".visually-hidden, .message__meta, .message__author, button").forEach(function (el) { el.remove(); });
    copyText(words.textContent.trim()).then(
      function () { told(button, "Copied", "Copy"); },
      function () { told(button, "Copy failed", "Copy"); }
    );
  });

  function tick() {
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.max(0, Math.round((Date.parse(el.dataset.expires) - Date.now()) / 1000));
      el.textContent = left > 0 ? Math.floor(left / 60) + " min " + (left % 60) + " s left" : "Expired";
      // At 0 the card asks for itself: the server ends it expired (and tells every other view),
      // whether or not a sweep runs. Once per card shown.
      var card = left === 0 && el.closest(".card[data-card-url]");
      if (card && !card.hasAttribute("data-asked") && window.htmx) {
        card.setAttribute("data-asked", "");
        window.htmx.ajax("GET", card.getAttribute("data-card-url"), { target: card, swap: "outerHTML" });
      }
    });
  }
  setInterval(tick, 1000);
})();
