// Safe text and formatting for the scd console (loaded before console.js).
//
// Every string from the server reaches the page through el() as a text node, never as HTML,
// with control and bidi characters shown as \xNN / \uNNNN by visible(): node paths and error
// messages may hold markup or terminal escapes.
"use strict";

window.scdText = (() => {
  // ------------------------------------------------------------------ safe text
  // C0/C1 controls (ESC of terminal colour codes), zero-width and bidi-override characters.
  const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

  function visible(value) {
    return String(value ?? "").replace(INVISIBLE, (c) => {
      const code = c.charCodeAt(0);
      return code < 0x100
        ? "\\x" + code.toString(16).padStart(2, "0")
        : "\\u" + code.toString(16).padStart(4, "0");
    });
  }

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key === "title") node.title = visible(value);
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child !== null && child !== undefined) {
        node.append(child instanceof Node ? child : visible(child));
      }
    }
    return node;
  }

  function fill(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(
      ...(rows.length ? rows : [el("tr", null, el("td", { colSpan: columns, class: "muted" }, emptyText))]),
    );
  }

  // ------------------------------------------------------------------ formatting
  function bytes(n) {
    if (n === null || n === undefined) return "–";
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  function seconds(s) {
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  const clock = (ms) => new Date(ms).toLocaleTimeString();

  function pathsOf(item) {
    const deep = new Set(item.deepPaths || []);
    const all = [...(item.paths || [])];
    for (const p of deep) if (!all.includes(p)) all.push(p);
    return all.map((p) => (deep.has(p) ? `${p} (deep)` : p)).join(" ") || "–";
  }

  const badge = (text) => el("span", { class: `badge s-${String(text).toLowerCase()}` }, text);

  return { visible, el, fill, bytes, seconds, clock, pathsOf, badge };
})();
