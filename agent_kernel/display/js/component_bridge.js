// @ts-check
// The first script of a component's document, and the only one its policy lets run: in
// this document and in any frame the component makes (they inherit the policy), nothing
// of the component runs before the loop below has taken the peer-connection interfaces
// off the window. It uses nothing the component's markup can shadow (own properties of
// the window only), then runs the component's scripts with eval, which the policy allows.
// Its two slots (the state, the component's script) are JSON literals the kernel fills in.
(function () {
  "use strict";
  var peer = /^(webkit)?RTC/;
  var names = Object.getOwnPropertyNames(window);
  for (var i = 0; i < names.length; i++) {
    if (peer.test(names[i])) {
      try { delete window[names[i]]; } catch (e) {}
    }
  }
  if (Object.getOwnPropertyNames(window).some(function (name) { return peer.test(name); })) {
    throw new Error("agent-kernel: peer connections are still reachable, so the component does not run");
  }
  var up = window.parent, run = eval, pending = Object.create(null), next = 1, listeners = [];
  var ak = { state: __AK_STATE__ };
  function post(msg) {
    up.postMessage(msg, "*");
  }
  ak.setState = function (patch) {
    for (var key in patch) ak.state[key] = patch[key];
    post({ kind: "state", state: ak.state });
    listeners.forEach(function (f) { f(ak.state); });
  };
  ak.onState = function (f) { listeners.push(f); };
  ak.send = function (name, data) { post({ kind: "message", name: name, data: data === undefined ? null : data }); };
  ak.call = function (tool, input) {
    var id = next++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ kind: "call", id: id, tool: tool, input: input || {} });
    });
  };
  ak.onError = function (message) {};
  window.addEventListener("message", function (event) {
    if (event.source !== up) return;
    var m = event.data;
    if (!m || m.ak !== 1) return;
    if (m.kind === "result" && pending[m.id]) {
      var p = pending[m.id];
      delete pending[m.id];
      if (!m.ok) { p.reject(new Error(m.content)); return; }
      var value = m.content;
      try { value = JSON.parse(value); } catch (e) {}
      p.resolve(value);
    } else if (m.kind === "error") {
      ak.onError(m.message);
    }
  });
  window.ak = ak;

  // Handler attributes (onclick="...") are inline script the policy refuses: they are
  // compiled here instead, for the markup and for what the component adds later.
  function compileHandlers(element) {
    if (!element.attributes) return;
    for (var j = 0; j < element.attributes.length; j++) {
      var attribute = element.attributes[j];
      var name = attribute.name.toLowerCase();
      if (name.slice(0, 2) === "on" && name in element) {
        try { element[name] = new Function("event", attribute.value); } catch (e) { console.error(e); }
      }
    }
  }
  function compileTree(root) {
    compileHandlers(root);
    if (root.querySelectorAll) Array.prototype.forEach.call(root.querySelectorAll("*"), compileHandlers);
  }
  compileTree(document.documentElement);
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      if (change.type === "attributes") compileHandlers(change.target);
      else Array.prototype.forEach.call(change.addedNodes, compileTree);
    });
  }).observe(document.documentElement, { subtree: true, childList: true, attributes: true });

  // Scripts in the markup, then the component's script, each as a classic script would run.
  var scripts = /** @type {NodeListOf<HTMLScriptElement>} */ (document.querySelectorAll("script:not([data-ak-bridge])"));
  for (var k = 0; k < scripts.length; k++) {
    if (!scripts[k].src && /^(|text\/javascript|application\/javascript|module)$/i.test(scripts[k].type)) {
      try { run(scripts[k].text); } catch (e) { console.error(e); }
    }
  }
  run(__AK_CODE__);
})();
