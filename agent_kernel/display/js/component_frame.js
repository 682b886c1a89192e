// @ts-check
// Our frame around a component's frame. The component's document (a JSON literal the
// kernel fills in below) loads as srcdoc, which this document's frame-src 'none'
// allows while refusing every other document the inner frame tries to load: a
// navigation to any URL is refused before a request is made. If the inner frame loads a
// second document anyway (a reload, about:blank, an error page) it is removed. Messages
// pass through here: up only from the inner frame, plain JSON of a known kind under
// MAX_MESSAGE characters; down only from the widget.
(function () {
  "use strict";
  var MAX_MESSAGE = 65536, KINDS = ["state", "message", "call"];
  var inner = document.createElement("iframe"), loads = 0, up = window.parent;
  inner.setAttribute("sandbox", "allow-scripts");
  inner.setAttribute("referrerpolicy", "no-referrer");
  inner.setAttribute("title", "component");
  inner.style.cssText = "display: block; width: 100%; height: 100%; border: 0";
  inner.addEventListener("load", function () {
    loads += 1;
    if (loads > 1) {
      inner.remove();
      up.postMessage({ ak: 1, navigated: true }, "*");
    }
  });
  function plain(data) {
    var text;
    try {
      text = JSON.stringify(data);
    } catch (e) {
      return null;
    }
    if (typeof text !== "string") return null;
    if (text.length > MAX_MESSAGE) {
      up.postMessage({ ak: 1, dropped: true }, "*");
      return null;
    }
    return JSON.parse(text);
  }
  window.addEventListener("message", function (event) {
    if (!inner.isConnected) return;
    var data = event.data;
    if (event.source === inner.contentWindow) {
      var msg = plain(data);
      if (!msg || typeof msg !== "object" || KINDS.indexOf(msg.kind) < 0) return;
      delete msg.ak;
      up.postMessage({ ak: 1, msg: msg }, "*");
    } else if (event.source === up && data && data.ak === 1 && typeof data.kind === "string") {
      /** @type {Window} */ (inner.contentWindow).postMessage(data, "*");
    }
  });
  inner.srcdoc = __AK_DOCUMENT__;
  document.body.appendChild(inner);
})();
