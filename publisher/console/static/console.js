// The scd operator console. Plain script, no framework and no build step: it is served as is
// by the publisher (offline machines), reads the REST API every second and acts through it.
//
// Every string from the server reaches the page through text.js (el(), visible()): as a text
// node, never as HTML. The API token stays in this tab's sessionStorage and goes out only in
// Authorization headers of the actions, never in a URL.
"use strict";

(() => {
  const POLL_MS = 1000; // a change shows within 2 s: one poll plus its own duration
  const TABLE_ROWS = 20; // queue rows per page of the table (100 subscribers: 5 pages)
  const API_PAGE = 500; // queues per request to the paginated /queues
  const DETAIL_ROWS = 20;
  const LATEST_ROWS = 15;
  const MAX_RESULTS = 10;
  const TOKEN_KEY = "scd-console-token";
  const RESUMABLE = new Set(["PAUSED", "CANARY_FAILED"]);
  const STATE_ORDER = {
    BLOCKED: 0, PAUSED: 1, CANARY_FAILED: 2, WAITING_FOR_CANARY: 3, RUNNING: 4, IDLE: 5,
  };

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    queues: [],
    headErrors: new Map(),
    page: 0,
    selected: null,
    busy: false,
    actions: 0, // actions started: numbers the results list
  };
  const $ = (id) => document.getElementById(id);

  const { visible, el, fill, bytes, seconds, clock, pathsOf, badge } = window.scdText;

  // ------------------------------------------------------------------ the API
  class ApiError extends Error {
    constructor(status, detail) {
      super(status ? `HTTP ${status}: ${detail}` : detail);
      this.status = status;
    }
  }

  function detailOf(data, fallback) {
    const detail = data && data.detail;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail.map((e) => `${(e.loc || []).slice(1).join(".")}: ${e.msg}`).join("; ");
    }
    return fallback;
  }

  async function api(method, path, body) {
    return (await call(method, path, body)).data;
  }

  async function call(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET" && state.token) headers.Authorization = `Bearer ${state.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "omit",
      });
    } catch (err) {
      throw new ApiError(0, "publisher unreachable");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null; // an empty or non-JSON answer: the status says enough
    }
    if (!response.ok) throw new ApiError(response.status, detailOf(data, response.statusText));
    return { data, headers: response.headers };
  }

  // Every alive subscriber's queue, page by page (the total comes in X-Total-Count): the
  // table filters and sorts them all, 100 subscribers being one request.
  async function allQueues() {
    const out = [];
    for (;;) {
      const { data, headers } = await call("GET", `/queues?skip=${out.length}&limit=${API_PAGE}`);
      out.push(...data);
      const total = Number(headers.get("X-Total-Count") ?? out.length);
      if (data.length === 0 || out.length >= total) return out;
    }
  }

  const queuePath = (name, suffix = "") => `/queues/${encodeURIComponent(name)}${suffix}`;

  // ------------------------------------------------------------------ rendering
  function renderAgent(agent) {
    $("agent").replaceChildren(
      el("strong", null, agent.agentName),
      " ",
      badge(agent.state),
      ` ${agent.leader ? "leader" : "follower"} · ${agent.queues} queues · ${agent.items} items`,
    );
  }

  function shownQueues() {
    const text = $("queue-filter").value.trim().toLowerCase();
    const wanted = $("queue-state").value;
    const sort = $("queue-sort").value;
    const rows = state.queues.filter(
      (q) =>
        (!wanted || q.state === wanted) &&
        (!text || `${q.subscriberAgentName} ${q.name}`.toLowerCase().includes(text)),
    );
    const byName = (a, b) => a.name.localeCompare(b.name);
    const order = {
      name: byName,
      size: (a, b) => b.size - a.size || byName(a, b),
      lag: (a, b) => b.lagMs - a.lagMs || byName(a, b),
      state: (a, b) => STATE_ORDER[a.state] - STATE_ORDER[b.state] || byName(a, b),
    }[sort];
    return rows.sort(order);
  }

  function queueRow(q) {
    const error = state.headErrors.get(q.name);
    const row = el(
      "tr",
      { class: q.name === state.selected ? "selected" : "", "data-queue": q.name, tabIndex: 0 },
      el("td", null, el("strong", null, q.subscriberAgentName), el("div", { class: "small muted" }, q.name)),
      el("td", { class: "state" }, badge(q.state)),
      el("td", { class: "num size" }, q.size),
      el("td", { class: "num" }, q.headOffset ?? "–"),
      el("td", { class: "num" }, seconds(q.lagMs / 1000)),
      el("td", { class: "num" }, q.headAttempts),
      el("td", { class: "error", title: error ? error.message : "" }, error ? error.message : ""),
      el("td", { class: "num" }, q.errorQueue ? q.errorQueueSize ?? 0 : "blocks"),
      el("td", null, q.editable ? "yes" : "no"),
    );
    const open = () => select(q.name);
    row.addEventListener("click", open);
    row.addEventListener("keydown", (e) => e.key === "Enter" && open());
    return row;
  }

  function renderQueues() {
    const rows = shownQueues();
    const pages = Math.max(1, Math.ceil(rows.length / TABLE_ROWS));
    state.page = Math.min(state.page, pages - 1);
    const first = state.page * TABLE_ROWS;
    $("queue-count").textContent = `${rows.length} of ${state.queues.length}`;
    $("queue-page").textContent = `${state.page + 1} / ${pages}`;
    $("queue-prev").disabled = state.page === 0;
    $("queue-next").disabled = state.page >= pages - 1;
    const tbody = $("queues").tBodies[0];
    fill(tbody, rows.slice(first, first + TABLE_ROWS).map(queueRow), 9, "No alive subscriber matches.");
  }

  function renderPackages(view) {
    const rows = view.packages.map((p) =>
      el(
        "tr",
        { "data-offset": p.offset },
        el("td", { class: "num" }, p.offset),
        el("td", null, p.action),
        el("td", { class: "paths", title: pathsOf(p) }, pathsOf(p)),
        el("td", { class: "num" }, bytes(p.size)),
        el("td", null, p.spilled ? "spilled" : "inline"),
        el("td", { class: "num" }, seconds(p.ageS)),
        el(
          "td",
          { class: "num imported" },
          `${p.imported} / ${view.subscribers}` + (p.failed ? ` · ${p.failed} failed` : ""),
        ),
      ),
    );
    fill($("packages").tBodies[0], rows, 7, "No package on the log since this publisher started.");
  }

  function renderEvents(view) {
    $("events-note").textContent = view.error ? `(stale: ${visible(view.error)})` : `on ${visible(view.topic)}`;
    const rows = view.events.map((e) =>
      el(
        "tr",
        { "data-offset": e.offset },
        el("td", { class: "num" }, e.offset),
        el("td", { class: "paths", title: pathsOf(e) }, pathsOf(e)),
        el("td", { class: "small", title: e.packageId }, e.packageId),
        el("td", { class: "num" }, `${seconds(e.ageS)} ago`),
      ),
    );
    fill($("events").tBodies[0], rows, 4, "No distributed event yet.");
    const failures = view.failures.map((f) =>
      el(
        "tr",
        { "data-offset": f.offset },
        el("td", { class: "num" }, f.offset),
        el("td", { class: "small", title: f.subscriber }, f.subscriber),
        el("td", { class: "num" }, f.maxRetries < 0 ? `${f.attempt}` : `${f.attempt} / ${f.maxRetries + 1}`),
        el("td", { class: "error", title: f.message }, `${f.errorClass} ${f.exception}: ${f.message}`),
        el("td", {}, f.willDiscard ? "discarded" : "retried"),
        el("td", { class: "num" }, `${seconds(f.ageS)} ago`),
      ),
    );
    fill($("failures").tBodies[0], failures, 6, "No failed import attempt.");
  }

  function itemRow(item, withAttempts) {
    const error = item.lastError ? item.lastError.message : "";
    return el(
      "tr",
      { "data-offset": item.offset },
      el("td", { class: "num" }, item.offset),
      el("td", null, item.action ?? "?"),
      el("td", { class: "paths", title: pathsOf(item) }, pathsOf(item)),
      withAttempts ? el("td", { class: "num" }, bytes(item.size)) : null,
      withAttempts ? el("td", { class: "num" }, item.attempts) : null,
      el("td", { class: "error", title: error }, error),
    );
  }

  async function refreshDetail() {
    const name = state.selected;
    const section = $("detail");
    if (!name) {
      section.hidden = true;
      return;
    }
    section.hidden = false;
    $("detail-name").textContent = visible(name);
    const queue = state.queues.find((q) => q.name === name);
    const editable = Boolean(queue && queue.editable);
    for (const id of ["clear-head", "clear-first", "clear-all", "clear-count"]) $(id).disabled = !editable;
    // One button: Resume while the queue shows PAUSED, or CANARY_FAILED (a resume imports the
    // package a canary failed); an aggregated queue is not paused itself.
    const pause = $("pause-toggle");
    pause.textContent = queue && RESUMABLE.has(queue.state) ? "Resume" : "Pause";
    pause.disabled = !queue || queue.subscriberSlingId === "aggregated";
    $("detail-editable").textContent = !queue
      ? "this subscriber is no longer alive"
      : editable
        ? ""
        : "read-only subscriber: its queue cannot be cleared";
    if (!queue) return;
    let items;
    let errors;
    try {
      [items, errors] = await Promise.all([
        api("GET", queuePath(name, `?skip=0&limit=${DETAIL_ROWS}`)),
        queue.errorQueue ? api("GET", queuePath(name, `/errors?skip=0&limit=${DETAIL_ROWS}`)) : null,
      ]);
    } catch (err) {
      $("detail-total").textContent = visible(err.message); // e.g. gone since the last poll
      return;
    }
    if (state.selected !== name) return; // another queue was picked meanwhile
    $("detail-total").textContent = `${items.total} in total`;
    fill($("detail-items").tBodies[0], items.items.map((i) => itemRow(i, true)), 6, "Empty.");
    $("detail-error-total").textContent = errors ? `${errors.total} in total` : "(none: this subscriber blocks on failures)";
    fill($("detail-errors").tBodies[0], errors ? errors.items.map((i) => itemRow(i, false)) : [], 4, "Empty.");
  }

  function setLive(ok, text) {
    const live = $("live");
    live.classList.toggle("down", !ok);
    live.textContent = text;
  }

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    try {
      const [agent, queues, errors, packages, events] = await Promise.all([
        api("GET", "/agent"),
        allQueues(),
        api("GET", "/console/api/head-errors"),
        api("GET", `/console/api/packages?limit=${LATEST_ROWS}`),
        api("GET", `/console/api/events?limit=${LATEST_ROWS}`),
      ]);
      state.queues = queues;
      state.headErrors = new Map(errors.map((e) => [e.queue, e]));
      renderAgent(agent);
      renderQueues();
      renderPackages(packages);
      renderEvents(events);
      await refreshDetail();
      setLive(true, `live · updated ${clock(Date.now())}`);
    } catch (err) {
      setLive(false, `${err.message} (retrying)`);
    } finally {
      state.busy = false;
    }
  }

  function select(name) {
    state.selected = name;
    renderQueues();
    refreshDetail().catch((err) => setLive(false, err.message));
  }

  // ------------------------------------------------------------------ actions
  function report(text) {
    const list = $("results");
    state.actions += 1;
    const entry = el("li", { class: "pending", "data-seq": state.actions }, `${clock(Date.now())} ${text} …`);
    if (list.firstElementChild && list.firstElementChild.classList.contains("muted")) list.replaceChildren();
    list.prepend(entry);
    while (list.children.length > MAX_RESULTS) list.lastElementChild.remove();
    return (ok, outcome) => {
      entry.className = ok ? "ok" : "err";
      entry.textContent = visible(`${clock(Date.now())} ${text}: ${outcome}`);
    };
  }

  async function act(text, method, path, body, describe) {
    const done = report(text);
    try {
      done(true, describe(await api(method, path, body)));
      refresh();
    } catch (err) {
      done(false, err.status === 401 ? `${err.message} (set the right token above)` : err.message);
    }
  }

  function showToken() {
    $("token-state").textContent = state.token ? "token set for this tab" : "no token: actions will be refused";
  }

  function distribute(event) {
    event.preventDefault();
    const action = $("dist-action").value;
    const paths = $("dist-paths").value.split(/\s+/).filter(Boolean);
    const deep = $("dist-deep").checked && action !== "TEST";
    const body = deep ? { action, deepPaths: paths } : { action, paths };
    act(`distribute ${action} ${paths.join(" ")}`, "POST", "/distribute", body, (d) =>
      `offset ${d.offset}, ${bytes(d.size)}, ${d.spilled ? "spilled to the blob store" : "inline"}` +
      (d.throttledS > 0 ? `, held back ${d.throttledS.toFixed(1)} s` : ""),
    );
  }

  function clear(mode) {
    const name = state.selected;
    if (!name) return;
    const body = { mode };
    let text = `clear ${mode} of ${name}`;
    if (mode === "first") {
      body.count = Math.max(1, parseInt($("clear-count").value, 10) || 1);
      text = `clear first ${body.count} of ${name}`;
    }
    if (mode === "all" && !window.confirm(`Clear every item of ${visible(name)}?`)) return;
    act(text, "POST", queuePath(name, "/clear"), body, (d) =>
      `removed ${d.removed}` + (d.clearOffset === null ? "" : ` (up to offset ${d.clearOffset})`),
    );
  }

  function pauseOrResume() {
    const name = state.selected;
    const queue = state.queues.find((q) => q.name === name);
    if (!queue) return;
    const action = RESUMABLE.has(queue.state) ? "resume" : "pause";
    act(`${action} ${name}`, "POST", queuePath(name, `/${action}`), undefined, (d) =>
      `${d.paused ? "pause" : "resume"} sent (command at offset ${d.commandOffset})`,
    );
  }

  function init() {
    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.token = $("token").value.trim();
      $("token").value = "";
      if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
      else sessionStorage.removeItem(TOKEN_KEY);
      showToken();
    });
    $("token-forget").addEventListener("click", () => {
      state.token = "";
      sessionStorage.removeItem(TOKEN_KEY);
      showToken();
    });
    $("distribute-form").addEventListener("submit", distribute);
    $("cleanup").addEventListener("click", () =>
      act("blob cleanup", "POST", "/cleanup", undefined, (d) =>
        `deleted ${d.deleted}, stamped ${d.stamped}, kept ${d.kept}, failed ${d.failed}`,
      ),
    );
    $("clear-head").addEventListener("click", () => clear("head"));
    $("clear-first").addEventListener("click", () => clear("first"));
    $("clear-all").addEventListener("click", () => clear("all"));
    $("pause-toggle").addEventListener("click", pauseOrResume);
    for (const id of ["queue-filter", "queue-state", "queue-sort"]) {
      for (const type of ["input", "change"]) {
        $(id).addEventListener(type, () => {
          state.page = 0;
          renderQueues();
        });
      }
    }
    $("queue-prev").addEventListener("click", () => {
      state.page -= 1;
      renderQueues();
    });
    $("queue-next").addEventListener("click", () => {
      state.page += 1;
      renderQueues();
    });
    showToken();
    refresh();
    setInterval(refresh, POLL_MS);
  }

  init();
})();
