// The EnvScaler web page: catalogue, playground and operator view over the gateway's REST API.
//
// Environment data (summaries, rules, tool descriptions, tasks, states) was written by a model:
// everything is rendered as text nodes built by `el`, never parsed as HTML. The page is served
// with a CSP that forbids inline scripts and HTML sinks (Trusted Types), so a mistake here throws
// rather than runs. The API key, when the gateway needs one, lives in sessionStorage: this tab only.
"use strict";

const KEY_STORAGE = "envscaler.apiKey";
const OPERATOR_INTERVAL_MS = 2000;
const OPERATOR_HISTORY = 150;  // chart points kept: the last 5 minutes at one poll every 2 s
const TOOL_ROWS = 10;  // the busiest (environment, tool) rows shown; the filter searches them all

// ------------------------------------------------------------------ DOM helpers

/** An element with properties and children; strings become text nodes (never markup). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "value" || name === "checked" || name === "selected") node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const byId = (id) => document.getElementById(id);

function show(node, visible) {
  node.hidden = !visible;
}

/** Compact JSON for one cell; indented JSON for a block. */
function json(value, indent) {
  return value === undefined ? "" : JSON.stringify(value, null, indent);
}

function notice(message, kind = "error") {
  const box = byId("notice");
  box.className = kind;
  box.textContent = message;
  show(box, Boolean(message));
}

// ------------------------------------------------------------------ the API

class ApiError extends Error {
  constructor(status, type, message, field) {
    super(message);
    this.status = status;
    this.type = type;
    this.field = field;
  }
  toString() {
    return `${this.type}${this.status ? ` (${this.status})` : ""}: ${this.message}`;
  }
}

let authWaiters = [];

/** One request to the gateway: {status, data (parsed JSON or null), text}. A 401 shows the key
 * form and retries once a key is given. */
async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, "Unreachable", `the gateway does not answer (${error.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.status === 401) {
    await askForKey(failure({ status: 401, data, text }).message);
    return send(method, path, body);
  }
  return { status: response.status, data, text };
}

/** The ApiError of an answer, in the gateway's error shape when it has one. */
function failure({ status, data, text }) {
  const detail = (data && data.error) || {};
  return new ApiError(status, detail.type || `HTTP ${status}`,
                      detail.message || text.slice(0, 300), detail.field);
}

/** The parsed JSON (or the text) of a successful answer; anything else throws an ApiError. */
async function api(method, path, body) {
  const answer = await send(method, path, body);
  if (answer.status >= 200 && answer.status < 300) return answer.data ?? answer.text;
  throw failure(answer);
}

/** Show the key form and wait until the user gives a key (every waiting request retries). */
function askForKey(reason) {
  sessionStorage.removeItem(KEY_STORAGE);
  show(byId("forget-key"), false);
  byId("auth-error").textContent = reason || "";
  show(byId("auth"), true);
  byId("auth-key").focus();
  return new Promise((resolve) => authWaiters.push(resolve));
}

function setupAuth() {
  byId("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = byId("auth-key").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_STORAGE, key);
    byId("auth-key").value = "";
    show(byId("auth"), false);
    show(byId("forget-key"), true);
    const waiters = authWaiters;
    authWaiters = [];
    waiters.forEach((resolve) => resolve());
  });
  byId("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    location.reload();
  });
  show(byId("forget-key"), Boolean(sessionStorage.getItem(KEY_STORAGE)));
}

const enc = encodeURIComponent;

// ------------------------------------------------------------------ views

const views = ["catalogue", "playground", "operator"];

function route() {
  const name = views.includes(location.hash.slice(1)) ? location.hash.slice(1) : "catalogue";
  for (const view of views) {
    show(byId(`view-${view}`), view === name);
    byId(`nav-${view}`).classList.toggle("active", view === name);
  }
  operator.active(name === "operator");
}

// ------------------------------------------------------------------ catalogue

const catalogue = {
  envs: [],

  async load() {
    const data = await api("GET", "/v1/envs");
    this.envs = data.envs;
    this.renderList();
    playground.fillEnvs(this.envs);
  },

  renderList() {
    const filter = byId("env-filter").value.trim().toLowerCase();
    const items = this.envs
      .filter((env) => !filter || `${env.id} ${env.summary}`.toLowerCase().includes(filter))
      .map((env) =>
        el("li", {},
          el("button", { type: "button", class: "env", dataset: { env: env.id },
                         onclick: () => this.open(env.id) },
            el("strong", {}, env.id),
            el("span", { class: "muted" }, ` ${env.tools} tools, ${env.scenarios} scenarios`),
            el("span", { class: "summary" }, env.summary))));
    byId("env-list").replaceChildren(...items);
  },

  async open(envId) {
    for (const button of byId("env-list").querySelectorAll("button.env")) {
      button.classList.toggle("active", button.dataset.env === envId);
    }
    const detail = byId("env-detail");
    detail.replaceChildren(el("p", { class: "muted" }, "Loading..."));
    try {
      const [env, scenarios] = await Promise.all([
        api("GET", `/v1/envs/${enc(envId)}`),
        api("GET", `/v1/envs/${enc(envId)}/scenarios`),
      ]);
      detail.replaceChildren(...this.renderEnv(env, scenarios.scenarios));
    } catch (error) {
      detail.replaceChildren(el("p", { class: "error" }, String(error)));
    }
  },

  renderEnv(env, scenarios) {
    const rules = Array.isArray(env.constraint_rules) ? env.constraint_rules : [];
    const entities = Array.isArray(env.state_space) ? env.state_space : [];
    return [
      el("h2", { id: "env-title" }, env.id),
      el("p", { class: "muted" }, `class ${env.class_name}`,
        env.provenance ? ` · ${env.provenance.model || ""} ${env.provenance.created || ""}` : ""),
      el("p", { class: "summary" }, env.summary),
      el("p", { class: "intro" }, env.introduction),
      el("h3", {}, "State"),
      el("table", { class: "table" },
        el("thead", {}, el("tr", {}, el("th", {}, "entity"), el("th", {}, "attributes"),
                                     el("th", {}, "description"))),
        el("tbody", {}, entities.map((e) =>
          el("tr", {}, el("td", {}, e.entity), el("td", {}, e.attributes),
                       el("td", {}, e.description))))),
      el("h3", {}, `Rules (${rules.length})`),
      el("ul", { id: "env-rules", class: "rules" }, rules.map((rule) => el("li", {}, typeof rule === "string" ? rule : json(rule)))),
      el("h3", {}, `Tools (${env.tools.length})`),
      el("div", { id: "env-tools" }, env.tools.map((tool) => this.renderTool(tool))),
      el("h3", {}, `Scenarios (${scenarios.length})`),
      el("div", { id: "env-scenarios" }, scenarios.map((s) => this.renderScenario(env.id, s))),
    ];
  },

  renderTool(tool) {
    const fn = tool.function || tool;
    const parameters = fn.parameters || {};
    const properties = parameters.properties || {};
    const required = new Set(parameters.required || []);
    return el("details", { class: "tool", dataset: { tool: fn.name } },
      el("summary", {}, el("code", {}, fn.name), " ",
        el("span", { class: "muted" }, firstLine(fn.description))),
      el("pre", { class: "doc" }, fn.description || ""),
      el("table", { class: "table" },
        el("thead", {}, el("tr", {}, ["parameter", "type", "required", "default", "description"]
          .map((h) => el("th", {}, h)))),
        el("tbody", {}, Object.entries(properties).map(([name, schema]) =>
          el("tr", {},
            el("td", {}, el("code", {}, name)),
            el("td", {}, typeLabel(schema)),
            el("td", {}, required.has(name) ? "yes" : ""),
            el("td", {}, "default" in schema ? json(schema.default) : ""),
            el("td", {}, schema.description || ""))))),
      el("details", {}, el("summary", {}, "JSON schema"),
        el("pre", { class: "json" }, json(tool, 2))));
  },

  renderScenario(envId, scenario) {
    const body = el("div", { class: "scenario-body" }, el("p", { class: "muted" }, "Loading..."));
    let loaded = false;
    const details = el("details", { class: "scenario", dataset: { scenario: scenario.id } },
      el("summary", {}, el("code", {}, scenario.id), " ", el("span", { class: "badge" }, scenario.split),
        " ", el("span", { class: "muted" }, firstLine(scenario.task))),
      body);
    details.addEventListener("toggle", async () => {
      if (!details.open || loaded) return;
      loaded = true;
      try {
        const detail = await api("GET", `/v1/envs/${enc(envId)}/scenarios/${enc(scenario.id)}`);
        body.replaceChildren(
          el("p", { class: "task" }, detail.task),
          el("h4", {}, `Checklist (${detail.checklist.length})`),
          el("ol", { class: "checklist" }, detail.checklist.map((check) =>
            el("li", {}, el("span", { class: "item" }, check.item),
              el("details", {}, el("summary", {}, "check_func"),
                el("pre", { class: "code" }, check.check_func))))),
          el("button", { type: "button", class: "try",
                         onclick: () => playground.prepare(envId, scenario.id) },
            "Open in the playground"));
      } catch (error) {
        loaded = false;
        body.replaceChildren(el("p", { class: "error" }, String(error)));
      }
    });
    return details;
  },
};

function firstLine(text) {
  return String(text || "").split("\n")[0];
}

function typeLabel(schema) {
  const types = [].concat(schema.type || (schema.enum ? "enum" : "any"));
  const label = types.join(" | ");
  return schema.enum ? `${label}: ${schema.enum.map((v) => json(v)).join(", ")}` : label;
}

// ------------------------------------------------------------------ tool forms

/** The JSON type a field edits: the first non-null type of its schema. */
function fieldType(schema) {
  const types = [].concat(schema.type || []).filter((t) => t !== "null");
  if (schema.enum) return "enum";
  return types.length === 1 ? types[0] : "json";
}

/** A form field for one parameter, with `read()` giving {present, value} or throwing; an empty
 * field is not present (the caller refuses a required one before sending anything). */
function makeField(name, schema, required) {
  const type = fieldType(schema);
  const id = `arg-${name}`;
  let input;
  let read;
  if (type === "enum" || type === "boolean") {
    const values = type === "enum" ? schema.enum.filter((v) => v !== null) : [true, false];
    input = el("select", { id, dataset: { arg: name } },
      required ? null : el("option", { value: "" }, "(omit)"),
      values.map((v, i) => el("option", { value: String(i) }, json(v))));
    read = () => (input.value === "" ? { present: false } : { present: true, value: values[Number(input.value)] });
  } else if (type === "string") {
    input = el("input", { id, type: "text", dataset: { arg: name }, autocomplete: "off" });
    read = () => (input.value === "" ? { present: false } : { present: true, value: input.value });
  } else if (type === "integer" || type === "number") {
    input = el("input", { id, type: "number", step: type === "integer" ? "1" : "any", dataset: { arg: name } });
    read = () => {
      if (input.value === "") return { present: false };
      const value = Number(input.value);
      if (!Number.isFinite(value)) throw new ApiError(0, "InvalidInput", `${name}: not a number`, name);
      return { present: true, value };
    };
  } else {
    input = el("textarea", { id, rows: "3", dataset: { arg: name }, placeholder: "JSON" });
    read = () => {
      if (input.value.trim() === "") return { present: false };
      try {
        return { present: true, value: JSON.parse(input.value) };
      } catch (error) {
        throw new ApiError(0, "InvalidInput", `${name}: not JSON (${error.message})`, name);
      }
    };
  }
  const hint = [typeLabel(schema), required ? "required" : "optional",
                "default" in schema ? `default ${json(schema.default)}` : ""].filter(Boolean).join(", ");
  const wrapper = el("div", { class: "field", dataset: { field: name } },
    el("label", { for: id }, el("code", {}, name), required ? " *" : ""),
    input,
    el("small", { class: "muted" }, hint, schema.description ? ` — ${schema.description}` : ""));
  return { name, required, wrapper, read };
}

// ------------------------------------------------------------------ playground

const playground = {
  session: null,
  tools: [],
  fields: [],
  initialState: null,
  pendingScenario: null,

  setup() {
    byId("pg-env").addEventListener("change", () => this.run(() => this.loadScenarios()));
    byId("pg-setup").addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(() => this.open());
    });
    byId("pg-tool").addEventListener("change", () => this.renderForm());
    byId("pg-call-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(() => this.call());
    });
    byId("pg-validate").addEventListener("click", () => this.run(() => this.validate()));
    byId("pg-reset").addEventListener("click", () => this.run(() => this.reset()));
    byId("pg-close").addEventListener("click", () => this.run(() => this.close()));
  },

  /** Run an action with the buttons disabled; its error goes to the notice line. */
  async run(action) {
    const view = byId("view-playground");
    const buttons = view.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    view.dataset.busy = "true";
    notice("");
    try {
      await action();
    } catch (error) {
      notice(String(error));
      if (error.field) this.markFields([error.field]);
      const ended = { SessionExpired: "expired", SessionClosed: "closed" }[error.type];
      if (ended && this.session) {
        this.session.status = ended;
        this.renderSession();
      }
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
      this.syncButtons();
      delete view.dataset.busy;
    }
  },

  fillEnvs(envs) {
    const select = byId("pg-env");
    const current = select.value;
    select.replaceChildren(...envs.map((env) => el("option", { value: env.id }, env.id)));
    if (current) select.value = current;
    this.loadScenarios().catch((error) => notice(String(error)));
  },

  async loadScenarios() {
    const envId = byId("pg-env").value;
    const select = byId("pg-scenario");
    if (!envId) return;
    const data = await api("GET", `/v1/envs/${enc(envId)}/scenarios`);
    if (byId("pg-env").value !== envId) return;  // changed meanwhile
    select.replaceChildren(...data.scenarios.map((s) =>
      el("option", { value: s.id }, `${s.id} (${s.split})`)));
    if (this.pendingScenario) {
      select.value = this.pendingScenario;
      this.pendingScenario = null;
    }
  },

  /** From the catalogue: choose this env and scenario, then show the playground. */
  async prepare(envId, scenarioId) {
    byId("pg-env").value = envId;
    this.pendingScenario = scenarioId;
    await this.loadScenarios();
    location.hash = "#playground";
  },

  async open() {
    if (this.session && this.session.status === "active") await this.close();
    const body = { env: byId("pg-env").value, scenario: byId("pg-scenario").value,
                   seed: Number(byId("pg-seed").value || 0) };
    const created = await api("POST", "/v1/sessions", body);
    this.session = { id: created.session_id, env: created.env, status: created.status,
                     epoch: 0, step: 0, task: created.task };
    this.tools = created.tools.map((t) => t.function || t);
    byId("pg-tool").replaceChildren(...this.tools.map((t) => el("option", { value: t.name }, t.name)));
    this.renderForm();
    this.clearEpoch();
    show(byId("pg-session"), true);
    await this.refreshState(true);
  },

  clearEpoch() {
    byId("pg-result").textContent = "";
    byId("pg-result").removeAttribute("data-index");
    byId("pg-log").replaceChildren();
    byId("pg-reward").textContent = "Not validated yet.";
    byId("pg-reward").className = "reward muted";
    byId("pg-checks").replaceChildren();
    this.renderSession();
  },

  renderSession() {
    const s = this.session;
    byId("pg-session-id").textContent = s.id;
    byId("pg-status").textContent = s.status;
    byId("pg-status").dataset.status = s.status;
    byId("pg-epoch").textContent = String(s.epoch);
    byId("pg-step").textContent = String(s.step);
    byId("pg-task").textContent = s.task || "";
  },

  syncButtons() {
    const active = Boolean(this.session) && this.session.status === "active";
    for (const id of ["pg-call", "pg-reset", "pg-close"]) byId(id).disabled = !active;
    byId("pg-validate").disabled = !this.session;
  },

  renderForm() {
    const tool = this.tools.find((t) => t.name === byId("pg-tool").value);
    if (!tool) return;
    const parameters = tool.parameters || {};
    const required = new Set(parameters.required || []);
    this.fields = Object.entries(parameters.properties || {}).map(([name, schema]) =>
      makeField(name, schema, required.has(name)));
    byId("pg-tool-doc").textContent = tool.description || "";
    byId("pg-args").replaceChildren(...this.fields.map((f) => f.wrapper));
  },

  markFields(names) {
    for (const field of this.fields) field.wrapper.classList.toggle("invalid", names.includes(field.name));
  },

  async call() {
    this.markFields([]);
    const args = {};
    const missing = [];
    for (const field of this.fields) {
      const { present, value } = field.read();
      if (present) args[field.name] = value;
      else if (field.required) missing.push(field.name);
    }
    if (missing.length) {  // marked here: an empty text is not a value the user gave
      this.markFields(missing);
      throw new ApiError(0, "MissingArguments", `required, left empty: ${missing.join(", ")}`);
    }
    const name = byId("pg-tool").value;
    const answer = await api("POST", `/v1/sessions/${enc(this.session.id)}/calls`,
                             { name, arguments: args });
    const result = byId("pg-result");
    result.textContent = json(answer.ok ? answer.result : { error: answer.error }, 2);
    result.className = answer.ok ? "json" : "json failed";
    result.dataset.index = String(answer.index);
    byId("pg-log").append(el("li", { class: answer.ok ? "" : "failed" },
      el("code", {}, name), " ", json(args), answer.ok ? "" : ` → ${answer.error.type}`));
    await this.refreshState(false);
  },

  async refreshState(initial) {
    const data = await api("GET", `/v1/sessions/${enc(this.session.id)}/state`);
    if (initial) this.initialState = data.state;
    this.session.epoch = data.epoch;
    this.session.step = data.step;
    this.renderSession();
    byId("pg-state").textContent = json(data.state, 2);
    const rows = mergeAliases(diff(this.initialState, data.state)).map((change) =>
      el("tr", { class: change.kind, dataset: { path: change.path } },
        el("td", {}, el("code", {}, change.path || "(root)"),
          change.aliases.length ? el("small", { class: "muted aliases" },
                                     `also ${change.aliases.join(", ")}`) : null),
        el("td", {}, json(change.before)),
        el("td", {}, json(change.after))));
    const body = byId("pg-diff").tBodies[0];
    body.replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colspan: "3", class: "muted" }, "No change."))]));
    byId("pg-diff").dataset.changes = String(rows.length);
  },

  async validate() {
    const result = await api("POST", `/v1/sessions/${enc(this.session.id)}/validate`, {});
    const reward = byId("pg-reward");
    reward.className = `reward ${result.reward === 1 ? "passed" : "failed"}`;
    reward.textContent = `reward ${result.reward} (${result.passed} of ${result.total} checks passed)`;
    reward.dataset.reward = String(result.reward);
    byId("pg-checks").replaceChildren(...result.checks.map((check) =>
      el("li", { class: check.passed ? "passed" : "failed", dataset: { passed: String(check.passed) } },
        el("span", { class: "verdict" }, check.passed ? "✔ passed" : "✘ failed"), " ",
        check.item, check.error ? el("pre", { class: "code" }, check.error) : null)));
  },

  async reset() {
    const result = await api("POST", `/v1/sessions/${enc(this.session.id)}/reset`, {});
    this.session.epoch = result.epoch;
    this.session.task = result.task;
    this.clearEpoch();
    await this.refreshState(true);
  },

  async close() {
    const result = await api("DELETE", `/v1/sessions/${enc(this.session.id)}`);
    this.session.status = result.status;
    this.renderSession();
  },
};

/** Paths where two JSON values differ: added, removed or changed leaves (objects and arrays
 * are walked, everything else compared whole). */
function diff(before, after, path = "", out = []) {
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    for (const key of keys) {
      const sub = path ? `${path}.${key}` : key;
      const inBefore = Object.prototype.hasOwnProperty.call(before, key);
      const inAfter = Object.prototype.hasOwnProperty.call(after, key);
      if (!inAfter) out.push({ path: sub, kind: "removed", before: before[key] });
      else if (!inBefore) out.push({ path: sub, kind: "added", after: after[key] });
      else diff(before[key], after[key], sub, out);
    }
  } else if (Array.isArray(before) && Array.isArray(after)) {
    const length = Math.max(before.length, after.length);
    for (let i = 0; i < length; i += 1) {
      const sub = `${path}[${i}]`;
      if (i >= after.length) out.push({ path: sub, kind: "removed", before: before[i] });
      else if (i >= before.length) out.push({ path: sub, kind: "added", after: after[i] });
      else diff(before[i], after[i], sub, out);
    }
  } else if (json(before) !== json(after)) {
    out.push({ path, kind: "changed", before, after });
  }
  return out;
}

/** One row per change. An attribute that shares its tables with others (EnvScaler's
 * environments keep `init_config`, whose tables are the state's own) repeats each change under a
 * longer path ending in the same one, with the same values: that copy is named beside the
 * change, not listed again. */
function mergeAliases(changes) {
  const shortestFirst = changes.map((change, order) => ({ ...change, order, aliases: [] }))
    .sort((a, b) => a.path.length - b.path.length);
  const kept = [];
  for (const change of shortestFirst) {
    const same = kept.find((row) => row.kind === change.kind && change.path.endsWith(`.${row.path}`)
      && json(row.before) === json(change.before) && json(row.after) === json(change.after));
    if (same) same.aliases.push(change.path);
    else kept.push(change);
  }
  return kept.sort((a, b) => a.order - b.order);
}

// ------------------------------------------------------------------ operator view

/** Prometheus text format: [{name, labels, value}] (comments and malformed lines skipped). */
function parseMetrics(text) {
  const samples = [];
  const line = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const raw of text.split("\n")) {
    if (!raw || raw.startsWith("#")) continue;
    const match = line.exec(raw);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[2] || "").matchAll(label)) {
      labels[key] = value.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

function total(samples, name, where = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

function number(value, digits = 0) {
  return Number.isFinite(value) ? value.toFixed(digits) : "-";
}

/** Every error the Errors card counts: sandbox failures, refused validations, replay mismatches. */
function errorCount(samples) {
  const failures = ["create", "crash", "timeout"].map((reason) =>
    total(samples, "envscaler_sandbox_failures_total", { reason }));
  const refused = ["starved", "busy"].map((outcome) =>
    total(samples, "envscaler_validations_total", { outcome }));
  return [...failures, ...refused, total(samples, "envscaler_replay_mismatches_total")]
    .reduce((sum, value) => sum + value, 0);
}

/** The cumulative figures of one poll; the charts plot the differences between two polls. */
function totals(samples, time) {
  return {
    time,
    calls: total(samples, "envscaler_tool_call_seconds_count"),
    callSeconds: total(samples, "envscaler_tool_call_seconds_sum"),
    judged: total(samples, "envscaler_validations_total", { outcome: "judged" }),
    rewardSum: total(samples, "envscaler_reward_sum"),
    rewardCount: total(samples, "envscaler_reward_count"),
    errors: errorCount(samples),
  };
}

/** What happened between two polls; null where nothing was measured (a gap in its chart). A
 * counter that went down (a worker replaced) counts as nothing happened. */
function interval(before, after) {
  const seconds = (after.time - before.time) / 1000;
  const calls = after.calls - before.calls;
  const rewards = after.rewardCount - before.rewardCount;
  return {
    calls: Math.max(0, calls) / seconds,
    validations: Math.max(0, after.judged - before.judged) / seconds,
    latency: calls > 0 ? (1000 * (after.callSeconds - before.callSeconds)) / calls : null,
    reward: rewards > 0 ? (after.rewardSum - before.rewardSum) / rewards : null,
    errors: Math.max(0, after.errors - before.errors),
  };
}

const CHARTS = [
  { key: "calls", title: "Tool calls", unit: " /s", digits: 1 },
  { key: "latency", title: "Mean call latency", unit: " ms", digits: 2 },
  { key: "reward", title: "Mean reward", unit: "", digits: 3, top: 1 },
  { key: "errors", title: "Errors", unit: " per poll", digits: 0 },
];
const CHART_WIDTH = 300;
const CHART_HEIGHT = 64;

function svg(tag, attributes = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

/** A line chart of one figure over the polls kept (oldest at the left, newest at the right),
 * in SVG built node by node: no library to fetch, nothing for the CSP to allow. A poll with no
 * measure is a gap; a lone measure a dash. */
function chart(spec, values) {
  const measured = values.filter((v) => v !== null);
  const peak = Math.max(0, ...measured);
  const top = spec.top || peak || 1;
  const x = (i) => (values.length === 1 ? CHART_WIDTH : (CHART_WIDTH * i) / (values.length - 1));
  const y = (value) => CHART_HEIGHT - 1 - (value / top) * (CHART_HEIGHT - 2);
  const drawing = svg("svg", { viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, class: "chart",
                               preserveAspectRatio: "none", role: "img", "aria-label": spec.title });
  drawing.append(svg("line", { x1: 0, y1: CHART_HEIGHT, x2: CHART_WIDTH, y2: CHART_HEIGHT, class: "axis" }));
  let run = [];
  const flush = () => {
    if (run.length === 1) {
      const [[x0, y0]] = run;
      run = x0 >= 6 ? [[x0 - 6, y0], [x0, y0]] : [[x0, y0], [x0 + 6, y0]];
    }
    if (run.length) {
      drawing.append(svg("polyline", {
        points: run.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ") }));
    }
    run = [];
  };
  values.forEach((value, i) => (value === null ? flush() : run.push([x(i), y(value)])));
  flush();
  const last = measured.length ? measured[measured.length - 1] : NaN;
  return el("div", { class: "card chart-card", id: `op-chart-${spec.key}`,
                     dataset: { values: JSON.stringify(values) } },
    el("h3", {}, spec.title, " ", el("span", { class: "figure" }, `${number(last, spec.digits)}${spec.unit}`)),
    drawing,
    el("div", { class: "muted" }, `peak ${number(peak, spec.digits)}${spec.unit} over the last `
      + `${Math.round((values.length * OPERATOR_INTERVAL_MS) / 1000)} s`));
}

const operator = {
  timer: null,
  last: null,
  history: [],
  samples: [],

  active(on) {
    if (on && !this.timer) {
      this.poll();
      this.timer = setInterval(() => this.poll(), OPERATOR_INTERVAL_MS);
    } else if (!on && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.last = null;
      this.history = [];
    }
  },

  async poll() {
    let ready;
    let metricsText;
    try {
      // /readyz answers 503, with the same body, when a component is down.
      const readiness = await send("GET", "/readyz");
      if (readiness.status !== 200 && readiness.status !== 503) throw failure(readiness);
      ready = readiness.data;
      metricsText = await api("GET", "/metrics");
    } catch (error) {
      byId("op-updated").textContent = `unavailable: ${error}`;
      return;
    }
    const samples = parseMetrics(String(metricsText));
    const now = totals(samples, performance.now());
    const rates = this.last ? interval(this.last, now) : null;
    if (rates) this.history = [...this.history, rates].slice(-OPERATOR_HISTORY);
    this.last = now;
    this.samples = samples;
    this.render(ready, samples, now, rates || { calls: NaN, validations: NaN });
    this.renderCharts();
    this.renderTools();
    byId("op-updated").textContent = `Updated ${new Date().toLocaleTimeString()}.`;
  },

  render(ready, samples, now, rates) {
    const pool = ready.pool || {};
    const failures = (reason) => total(samples, "envscaler_sandbox_failures_total", { reason });
    const refused = (outcome) => total(samples, "envscaler_validations_total", { outcome });
    const validateCount = total(samples, "envscaler_validate_seconds_count");
    const cards = [
      card("Readiness", "op-ready", ready.ready ? "ready" : "NOT READY", ready.ready ? "passed" : "failed",
        [`instance ${ready.instance}`, `isolation ${ready.isolation}`,
         ...Object.entries(ready.components || {}).map(([name, c]) =>
           `${name}: ${c.ok ? "ok" : c.error}`)]),
      card("Warm pool", "op-pool", `${pool.ready} / ${pool.target}`, "",
        [el("meter", { min: "0", max: String(pool.target || 1), value: String(pool.ready || 0) }),
         `ready / target; live sandboxes ${pool.live} of ${pool.capacity}`]),
      card("Live sessions", "op-live", number(total(samples, "envscaler_sessions_live")), "",
        [`created ${number(total(samples, "envscaler_sessions_created_total"))}`,
         `expired ${number(total(samples, "envscaler_sessions_expired_total"))}`,
         `rebuilt by replay ${number(total(samples, "envscaler_session_rebuilds_total"))}`]),
      card("Tool calls", "op-calls", `${number(rates.calls, 1)} /s`, "",
        [`total ${number(now.calls)}`, `mean ${number((1000 * now.callSeconds) / now.calls, 2)} ms`]),
      card("Validations", "op-validations", number(now.judged), "",
        [`${number(rates.validations, 2)} /s`,
         `mean reward ${number(now.rewardSum / now.rewardCount, 3)}`,
         `mean ${number(1000 * total(samples, "envscaler_validate_seconds_sum") / validateCount, 1)} ms`]),
      card("Errors", "op-errors", number(now.errors), "",
        [`sandbox failures: create ${number(failures("create"))}, crash ${number(failures("crash"))}, timeout ${number(failures("timeout"))}`,
         `validations refused: starved ${number(refused("starved"))}, busy ${number(refused("busy"))}`,
         `replay mismatches ${number(total(samples, "envscaler_replay_mismatches_total"))}`]),
    ];
    byId("op-grid").replaceChildren(...cards);
  },

  renderCharts() {
    byId("op-charts").replaceChildren(...CHARTS.map((spec) =>
      chart(spec, this.history.map((point) => point[spec.key]))));
  },

  /** The busiest (environment, tool) rows matching the filter; the count says how many match. */
  renderTools() {
    const filter = byId("op-tool-filter").value.trim().toLowerCase();
    const all = this.samples
      .filter((s) => s.name === "envscaler_tool_call_seconds_count")
      .sort((a, b) => b.value - a.value);
    const matching = all.filter((s) => !filter
      || `${s.labels.env} ${s.labels.tool}`.toLowerCase().includes(filter));
    const rows = matching.slice(0, TOOL_ROWS).map((s) => {
      const sum = total(this.samples, "envscaler_tool_call_seconds_sum", s.labels);
      return el("tr", {}, el("td", {}, s.labels.env), el("td", {}, el("code", {}, s.labels.tool)),
        el("td", {}, number(s.value)), el("td", {}, number((1000 * sum) / s.value, 2)));
    });
    byId("op-tools").tBodies[0].replaceChildren(...rows);
    byId("op-tools-shown").textContent = filter
      ? `${rows.length} of ${matching.length} matching, ${all.length} in all`
      : `${rows.length} busiest of ${all.length}`;
  },
};

function card(title, id, figure, kind, lines) {
  return el("div", { class: "card stat", id },
    el("h3", {}, title),
    el("p", { class: `figure ${kind}` }, figure),
    lines.map((line) => el("div", { class: "muted" }, line)));
}

// ------------------------------------------------------------------ start

async function start() {
  setupAuth();
  playground.setup();
  playground.syncButtons();
  byId("env-filter").addEventListener("input", () => catalogue.renderList());
  byId("op-tool-filter").addEventListener("input", () => operator.renderTools());
  window.addEventListener("hashchange", route);
  route();
  try {
    await catalogue.load();
  } catch (error) {
    notice(String(error));
  }
}

start();
