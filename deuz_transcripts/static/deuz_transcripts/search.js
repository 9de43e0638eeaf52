// The transcript search page: on a phone, a page of hits folds the filters away so the
// hits start near the top (the summary line unfolds them; a filter with an error stays open).
"use strict";
(function () {
  const filters = document.getElementById("search-filters");
  const narrow = window.matchMedia("(max-width: 767px)").matches;
  if (filters && narrow && document.getElementById("search-results") &&
      !filters.querySelector(".errorlist")) {
    filters.open = false;
  }
})();
