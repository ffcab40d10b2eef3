// encrypt.js: the export page's "Download with a password" (issue 41), on top of app.js.
// As the password is typed it rates its strength (a meter and a word), and it says when
// the confirmation differs, before the form is sent. It only helps: the server checks
// both fields again, and the form works without it. The password is never sent
// anywhere but with the form, nor stored.
(function () {
  "use strict";

  var WORDS = ["", "too weak", "weak", "fair", "strong"];

  // Passwords that guessers try first, and keyboard runs; compared in lower case with
  // look-alike digits and signs read as letters (p@ssw0rd is password).
  var COMMON = ["password", "passwort", "motdepasse", "123456", "12345678", "123456789", "1234567890",
    "111111", "000000", "654321", "abc123", "qwerty", "qwertz", "azerty", "qwertyuiop", "asdfgh",
    "asdfghjkl", "zxcvbn", "1qaz2wsx", "letmein", "welcome", "iloveyou", "admin", "administrator",
    "monkey", "dragon", "sunshine", "football", "baseball", "princess", "master", "shadow", "secret",
    "trustno1", "login", "changeme", "default", "excel", "sheetq"];

  function unleet(s) {
    return s.replace(/[@4]/g, "a").replace(/3/g, "e").replace(/[1!|]/g, "i").replace(/0/g, "o")
      .replace(/[$5]/g, "s").replace(/7/g, "t");
  }

  // pool is how many characters each one of pw could be, by the classes it uses.
  function pool(pw) {
    var n = 0;
    if (/[a-z]/.test(pw)) n += 26;
    if (/[A-Z]/.test(pw)) n += 26;
    if (/[0-9]/.test(pw)) n += 10;
    if (/[ -\/:-@\[-`{-~]/.test(pw)) n += 33;
    if (/[^\x00-\x7f]/.test(pw)) n += 100;
    return Math.max(n, 10);
  }

  // effectiveLength counts the characters a guesser cannot predict from the one before:
  // a repeat (aaa) or the next of a run (abc, 321) adds nothing.
  function effectiveLength(pw) {
    var cs = Array.from(pw).map(function (c) { return c.codePointAt(0); });
    var n = 0;
    for (var i = 0; i < cs.length; i++) {
      if (i > 0 && cs[i] === cs[i - 1]) continue;
      var step = i > 0 ? cs[i] - cs[i - 1] : 0;
      if (i > 1 && Math.abs(step) === 1 && step === cs[i - 1] - cs[i - 2]) continue;
      n++;
    }
    return n;
  }

  // rate is pw's strength, 0 (nothing typed) to 4 (strong): the bits a guesser must
  // try, estimated from its length (discounting runs, repeats and common words) and
  // its kinds of characters.
  function rate(pw) {
    if (!pw) return 0;
    var lower = pw.toLowerCase(), plain = unleet(lower);
    var core = plain.replace(/^[^a-z]+|[^a-z]+$/g, "");
    if (COMMON.indexOf(lower) >= 0 || COMMON.indexOf(plain) >= 0 || (core.length >= 4 && COMMON.indexOf(core) >= 0)) return 1;
    var n = effectiveLength(pw);
    COMMON.forEach(function (w) {
      if (w.length >= 5 && plain.indexOf(w) >= 0) n -= w.length - 1; // a known word is one guess
    });
    var bits = Math.max(n, 1) * Math.log2(pool(pw));
    if (bits < 30) return 1;
    if (bits < 45) return 2;
    if (bits < 65) return 3;
    return 4;
  }

  function strength(form) {
    var box = form.querySelector("[data-encrypt-strength]");
    var pw = form.elements.namedItem("password");
    if (!box || !pw) return;
    box.hidden = false;
    var score = rate(pw.value);
    var meter = box.querySelector("meter"), word = box.querySelector("#encrypt-strength-word");
    if (meter) meter.value = score;
    if (word && word.textContent !== WORDS[score]) {
      word.textContent = WORDS[score];
      word.setAttribute("data-score", String(score));
    }
  }

  // mismatch says, beside the confirmation, that it differs from the password: while it
  // is typed, once it can no longer become the password; when it is left, or the form
  // sent, whenever it differs. It returns whether they differ.
  function mismatch(form, final) {
    var pw = form.elements.namedItem("password"), again = form.elements.namedItem("confirm");
    var msg = form.querySelector("#encrypt-mismatch");
    if (!pw || !again || !msg) return false;
    var differs = again.value !== "" && again.value !== pw.value;
    var shown = differs && (final || pw.value.indexOf(again.value) !== 0);
    var text = shown ? "The two passwords are not the same." : "";
    if (msg.textContent !== text) msg.textContent = text;
    again.setAttribute("aria-invalid", shown ? "true" : "false");
    return differs;
  }

  function formOf(el) {
    return el && el.closest ? el.closest("form[data-encrypt-form]") : null;
  }

  document.addEventListener("input", function (e) {
    var form = formOf(e.target);
    if (!form) return;
    strength(form);
    mismatch(form, false);
  });
  document.addEventListener("change", function (e) {
    var form = formOf(e.target);
    if (form && e.target.name === "confirm") mismatch(form, true);
  });
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.matches || !form.matches("form[data-encrypt-form]")) return;
    if (mismatch(form, true)) {
      e.preventDefault();
      form.elements.namedItem("confirm").focus();
      return;
    }
    // The answer is a download, and the page stays: the password does not stay on it.
    // The form's values are already taken when the submit event ends.
    setTimeout(function () {
      form.reset();
      strength(form);
      mismatch(form, false);
    }, 0);
  });

  // app.js replaces #job-live (where the form is) with a fresh copy when the export
  // changes (a webhook delivered, say): what was typed, and the form being open, are
  // carried over, so that the person typing does not lose it.
  function keepAcrossSwaps() {
    var live = document.getElementById("job-live");
    if (!live || !live.parentNode || !window.MutationObserver) return;
    new MutationObserver(function (records) {
      records.forEach(function (rec) {
        rec.removedNodes.forEach(function (old) {
          if (old.id !== "job-live" || !old.querySelector) return;
          var from = old.querySelector("[data-encrypt]");
          var to = document.querySelector("#job-live [data-encrypt]");
          if (!to) return;
          if (from) {
            to.open = to.open || from.open;
            ["password", "confirm"].forEach(function (name) {
              var a = from.querySelector('input[name="' + name + '"]'), b = to.querySelector('input[name="' + name + '"]');
              if (a && b && a.value) b.value = a.value;
            });
          }
          var form = to.querySelector("form[data-encrypt-form]");
          if (form) {
            strength(form);
            mismatch(form, false);
          }
        });
      });
    }).observe(live.parentNode, { childList: true });
  }

  document.querySelectorAll("form[data-encrypt-form]").forEach(strength);
  keepAcrossSwaps();
})();
