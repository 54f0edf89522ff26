// The inbox's one script: the list of waiting calls is fetched again every two seconds and
// replaced when it changed, so a call that pends or is decided elsewhere (another tab, the
// CLI, another host) shows without a reload. The HTML comes from the host, which escaped
// every string in it; nothing here builds markup from data.
"use strict";
(function () {
  const list = document.getElementById("inbox");
  if (!list) return;
  const source = list.getAttribute("data-refresh");
  let last = list.outerHTML;
  async function refresh() {
    try {
      const answer = await fetch(source, { credentials: "same-origin", cache: "no-store" });
      if (answer.status === 401 || answer.redirected) {
        window.location.assign("/ui/login");
        return;
      }
      if (!answer.ok) return;
      const fresh = await answer.text();
      if (fresh === last) return;
      const parsed = new DOMParser().parseFromString(fresh, "text/html");
      const section = parsed.getElementById("inbox");
      if (!section) return;
      const current = document.getElementById("inbox");
      current.replaceChildren(...Array.from(section.childNodes).map(
        (node) => document.importNode(node, true)));
      last = fresh;
    } catch (error) {
      // The host is away for a moment: the next round tries again.
    }
  }
  window.setInterval(refresh, 2000);
})();
