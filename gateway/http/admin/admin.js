// The admin page: signs in with an admin key (kept in this tab's sessionStorage only) and drives
// the admin API (/v1/admin/keys, /v1/admin/usage, /v1/admin/status). Every value the API returns
// is put on the page as text (textContent), never as HTML.

import { renderChart, shortNumber, usageSeries } from "./chart.js";

const STORED_KEY = "agent-gateway-admin-key";
const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let adminKey = sessionStorage.getItem(STORED_KEY);
let keys = [];
let editing = null;  // the name of the key the form updates; null: the form makes a new key

// --- the API -------------------------------------------------------------------------------------

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${adminKey}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    // relative: v1/... next to /admin, wherever the gateway is mounted
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, `The gateway did not answer (${err.message}).`);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = data && data.error && data.error.message ? data.error.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return data;
}

// --- small helpers -------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") element.className = value;
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function showError(id, message) {
  const box = $(id);
  box.textContent = message || "";
  box.hidden = !message;
}

const when = (seconds) => (seconds ? new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "");
const count = (n) => (n === null || n === undefined ? "0" : Number(n).toLocaleString("en-US"));
const list = (value) => (value === null || value === undefined ? null : value.join(", "));

// --- signing in and out --------------------------------------------------------------------------

function signedOut(message) {
  adminKey = null;
  sessionStorage.removeItem(STORED_KEY);
  $("dashboard").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in-view").hidden = false;
  $("admin-key").value = "";
  showError("sign-in-error", message);
  $("admin-key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const typed = $("admin-key").value.trim();
  if (!typed) return;
  adminKey = typed;
  showError("sign-in-error", "");
  try {
    // the key's check: the key list (a store read), not the status (which asks every upstream)
    await api("GET", "v1/admin/keys");
  } catch (err) {
    const why = err.status === 401 ? "This key is not accepted by the gateway."
      : err.status === 403 ? "This key is not an admin key."
        : err.status === 404 ? "This gateway has no keys yet, so no admin: make one with "
          + "agent-gateway keys create NAME --admin." : err.message;
    signedOut(why);
    return;
  }
  sessionStorage.setItem(STORED_KEY, adminKey);
  await openDashboard();
}

async function openDashboard() {
  $("sign-in-view").hidden = true;
  $("dashboard").hidden = false;
  $("sign-out").hidden = false;
  await Promise.all([loadStatus(), loadKeys()]);
  await loadUsage();
}

// A 401 or 403 after signing in: the key was revoked or lost its admin flag meanwhile.
function lostAccess(err) {
  if (err.status === 401 || err.status === 403) {
    signedOut(`Signed out: ${err.message}`);
    return true;
  }
  return false;
}

// --- status --------------------------------------------------------------------------------------

async function loadStatus() {
  let status;
  try {
    status = await api("GET", "v1/admin/status");
  } catch (err) {
    if (!lostAccess(err)) showError("status-error", err.message);
    return;
  }
  showError("status-error", "");
  $("replica").textContent = status.replica ? `replica ${status.replica}, up since ${when(status.started_at)}` : "";
  const runs = status.runs;
  const figure = (value, label) => el("div", { class: "figure" }, el("b", {}, value), el("span", {}, label));
  $("runs").replaceChildren(
    figure(`${runs.active} / ${runs.limit}`, "agent runs in progress"),
    figure(runs.background, "background runs held here"),
    figure(runs.requests_in_flight, "requests in flight"),
  );
  $("routes-table").tBodies[0].replaceChildren(...status.model_routes.map((route) => el("tr", {},
    el("td", {}, route.id, route.default ? el("span", { class: "badge" }, "default") : null),
    el("td", {}, route.model || el("span", { class: "muted" }, "first listed")),
    el("td", { class: "small" }, route.upstream),
    el("td", {}, route.answers
      ? el("span", { class: "yes" }, "yes", el("span", { class: "sub" }, `${route.latency_ms} ms`))
      : el("span", { class: "no" }, "no", el("span", { class: "sub" }, route.error || "")),
    route.listed === false ? el("span", { class: "sub warn" }, "model not listed") : null,
    route.cooling ? el("span", { class: "sub warn" }, "cooling down after a failure") : null),
    el("td", {}, route.fallbacks.join(" → ") || el("span", { class: "muted" }, "none")),
  )));
  const chains = status.web.chains;
  $("chains").textContent = Object.keys(chains).length
    ? Object.entries(chains).map(([cap, names]) => `${cap}: ${names.join(" → ") || "none"}`).join("   ·   ")
    : "The web tools were set up by the embedding application.";
  $("web-table").hidden = status.web.providers.length === 0;
  $("web-table").tBodies[0].replaceChildren(...status.web.providers.map((p) => el("tr", {},
    el("td", {}, p.name),
    el("td", {}, ["search", "extract", "crawl"].filter((c) => p[c]).join(", ")),
    el("td", {}, Object.entries(p.chains).map(([cap, at]) => (at === 0 ? cap : `${cap} (fallback ${at})`)).join(", ")
      || el("span", { class: "muted" }, "not used")),
    el("td", {}, !p.available ? el("span", { class: "muted" }, `unavailable: ${p.missing || "?"}`)
      : p.cooling_for > 0 ? el("span", { class: "no" }, `skipped ${p.cooling_for} s more: ${p.reason}`)
        : p.failures > 0 ? el("span", { class: "warn" }, `${p.failures} failure(s): ${p.reason}`)
          : el("span", { class: "yes" }, "ready")),
  )));
}

// --- keys ----------------------------------------------------------------------------------------

function limitsText(limits) {
  const parts = [];
  if (limits.rpm) parts.push(`${limits.rpm} rpm`);
  if (limits.tpm) parts.push(`${shortNumber(limits.tpm)} tpm`);
  if (limits.max_concurrent) parts.push(`${limits.max_concurrent} at once`);
  if (limits.max_stored_bytes) parts.push(`${+(limits.max_stored_bytes / 1e6).toFixed(2)} MB stored`);
  if (limits.token_budget) parts.push(`${shortNumber(limits.token_budget)} tokens / ${limits.budget_period || "total"}`);
  return parts.length ? parts.join(", ") : "no limits";
}

function accessText(access) {
  const parts = [`models: ${list(access.models) ?? "all"}`, `MCP: ${list(access.mcp) ?? "all"}`];
  if (access.web === false) parts.push("no web tools");
  return parts.join("; ");
}

function keyRow(key) {
  const revoked = Boolean(key.revoked_at);
  const expired = key.expires_at && key.expires_at * 1000 < Date.now();
  const state = revoked ? `revoked ${when(key.revoked_at)}` : expired ? `expired ${when(key.expires_at)}`
    : key.expires_at ? `expires ${when(key.expires_at)}` : "active";
  const usage = key.usage || {};
  const revoke = el("button", { type: "button", class: "danger", "data-action": "revoke" }, "Revoke");
  revoke.addEventListener("click", () => revokeKey(key.name, revoke));
  return el("tr", { class: revoked ? "revoked" : "", "data-key": key.name },
    el("td", {}, key.name, key.admin ? el("span", { class: "badge" }, "admin") : null,
      el("span", { class: "sub" }, `made ${when(key.created_at)}`)),
    el("td", {}, state),
    el("td", {}, limitsText(key.limits || {})),
    el("td", { class: "small" }, accessText(key.access || {})),
    el("td", {}, `${count(usage.requests)} requests`,
      el("span", { class: "sub" }, `${shortNumber(usage.input_tokens || 0)} in / ${shortNumber(usage.output_tokens || 0)} out tokens`),
      usage.last_used_at ? el("span", { class: "sub" }, `last ${when(usage.last_used_at)}`) : null),
    el("td", { class: "actions" }, revoked ? null : [
      el("button", { type: "button", class: "quiet", "data-action": "edit", onclick: () => editKey(key) }, "Edit"),
      revoke,
    ]),
  );
}

async function loadKeys() {
  try {
    keys = (await api("GET", "v1/admin/keys")).data;
  } catch (err) {
    if (!lostAccess(err)) showError("keys-error", err.message);
    return;
  }
  showError("keys-error", "");
  $("keys-table").tBodies[0].replaceChildren(...keys.map(keyRow));
  const chosen = $("usage-key").value;
  $("usage-key").replaceChildren(el("option", { value: "" }, "all keys"),
    ...keys.map((key) => el("option", { value: key.name, selected: key.name === chosen }, key.name)));
}

// Revoking asks twice (the button arms, a second click within 5 s revokes): no modal dialog.
async function revokeKey(name, button) {
  if (!button.classList.contains("armed")) {
    button.classList.add("armed");
    button.textContent = "Revoke: sure?";
    setTimeout(() => { button.classList.remove("armed"); button.textContent = "Revoke"; }, 5000);
    return;
  }
  button.disabled = true;
  try {
    await api("DELETE", `v1/admin/keys/${encodeURIComponent(name)}`);
  } catch (err) {
    if (!lostAccess(err)) showError("keys-error", err.message);
    return;
  }
  notice(`Key ${name} was revoked.`);
  await loadKeys();
}

function notice(message) {
  $("notice").textContent = message;
  $("notice").hidden = !message;
}

function openForm(key) {
  editing = key ? key.name : null;
  const form = $("key-form");
  form.reset();
  showError("key-form-error", "");
  $("key-form-title").textContent = key ? `Change key ${key.name}` : "New key";
  $("key-form-submit").textContent = key ? "Save" : "Create";
  form.elements.name.disabled = Boolean(key);
  form.hidden = false;
  if (key) {
    const limits = key.limits || {};
    const access = key.access || {};
    const fill = (field, value) => { form.elements[field].value = value === null || value === undefined ? "" : value; };
    fill("name", key.name);
    for (const field of ["rpm", "max_concurrent", "tpm", "token_budget", "budget_period"]) fill(field, limits[field]);
    fill("max_stored_mb", limits.max_stored_bytes ? limits.max_stored_bytes / 1e6 : null);
    fill("models", list(access.models));
    fill("mcp", list(access.mcp));
    form.elements.web.checked = access.web !== false;
    form.elements.admin.checked = Boolean(key.admin);
  }
  (key ? form.elements.rpm : form.elements.name).focus();
}

function editKey(key) {
  openForm(key);
}

// The form as the API's body: an empty field is null (no limit; every model or server allowed).
function formBody(form) {
  const number = (field) => (form.elements[field].value === "" ? null : Number(form.elements[field].value));
  const names = (field) => {
    const text = form.elements[field].value.trim();
    return text === "" ? null : text.split(",").map((s) => s.trim()).filter(Boolean);
  };
  const mb = number("max_stored_mb");
  const body = {
    admin: form.elements.admin.checked,
    limits: {
      rpm: number("rpm"), max_concurrent: number("max_concurrent"),
      max_stored_bytes: mb === null ? null : Math.round(mb * 1e6),
      tpm: number("tpm"), token_budget: number("token_budget"),
      budget_period: form.elements.budget_period.value || null,
    },
    access: { models: names("models"), mcp: names("mcp"), web: form.elements.web.checked },
  };
  const days = number("expires_days");
  if (days !== null) body.expires_days = days;
  return body;
}

async function submitKey(event) {
  event.preventDefault();
  const form = $("key-form");
  const body = formBody(form);
  let made;
  try {
    if (editing) {
      await api("PATCH", `v1/admin/keys/${encodeURIComponent(editing)}`, body);
    } else {
      made = await api("POST", "v1/admin/keys", { name: form.elements.name.value.trim(), ...body });
    }
  } catch (err) {
    if (!lostAccess(err)) showError("key-form-error", err.message);
    return;
  }
  form.hidden = true;
  if (made) {
    $("created-name").textContent = made.name;
    $("created-key").textContent = made.key;
    $("copied").textContent = "";
    $("created").hidden = false;
    notice("");
  } else {
    notice(`Key ${editing} was changed.`);
  }
  editing = null;
  await loadKeys();
}

async function copyKey() {
  const text = $("created-key").textContent;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // no clipboard API (a page on plain http:// other than localhost): select the key instead
    const range = document.createRange();
    range.selectNodeContents($("created-key"));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    $("copied").textContent = "Selected: press Ctrl+C (⌘C) to copy.";
    return;
  }
  $("copied").textContent = "Copied to the clipboard.";
}

function dismissKey() {
  // the only copy the page held: gone from the page once dismissed
  $("created-key").textContent = "";
  $("created").hidden = true;
}

// --- usage by day --------------------------------------------------------------------------------

async function loadUsage() {
  const days = Number($("usage-days").value);
  const key = $("usage-key").value;
  const query = new URLSearchParams({ days: String(days) });
  if (key) query.set("key", key);
  let rows;
  try {
    rows = (await api("GET", `v1/admin/usage?${query}`)).data;
  } catch (err) {
    if (!lostAccess(err)) showError("usage-error", err.message);
    return;
  }
  showError("usage-error", "");
  const { axis, series, unit } = usageSeries(rows, days, $("usage-metric").value);
  renderChart($("chart"), axis, series, unit);
  const total = series.map((s) => `${count(s.values.reduce((a, b) => a + b, 0))} ${s.label}`).join(", ");
  $("usage-total").textContent = `${key ? `Key ${key}` : "All keys"}, last ${days} days: ${total}.`;
}

// --- wiring --------------------------------------------------------------------------------------

$("sign-in").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => signedOut(""));
$("refresh").addEventListener("click", () => Promise.all([loadStatus(), loadKeys(), loadUsage()]));
$("new-key-button").addEventListener("click", () => openForm(null));
$("key-form").addEventListener("submit", submitKey);
$("key-form-cancel").addEventListener("click", () => { $("key-form").hidden = true; editing = null; });
$("copy-key").addEventListener("click", copyKey);
$("dismiss-key").addEventListener("click", dismissKey);
for (const id of ["usage-key", "usage-days", "usage-metric"]) $(id).addEventListener("change", loadUsage);

if (adminKey) {
  openDashboard();
} else {
  $("admin-key").focus();
}
