// The playground page: pick a group and a route, switch stages and edit parameters, ask,
// compare two configurations (A/B), score a question set, export YAML or a command.
//
// A configuration is kept as the command line writes it: the values the user typed are sent
// as `--set STAGE.PARAM=VALUE` items, so the server parses and validates them with the CLI's
// own code and returns the CLI's messages.
import { h, clear, slug } from './dom.js';
import { renderRun, renderAB, renderQuestionSet } from './render.js';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'graphroute-playground-token';

const S = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  info: null,
  routes: [],
  views: new Map(), // route name -> RouteView (GET playground/routes/NAME)
  group: '',
  side: 'a',
  compare: false,
  cfg: { a: null, b: null },
  timers: {},
  busy: false,
};

// --------------------------------------------------------------------------- API

class ApiFailure extends Error {
  constructor(status, body) {
    super(body?.message || (typeof body?.detail === 'string' ? body.detail : JSON.stringify(body?.detail ?? body)));
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (S.token) headers.Authorization = `Bearer ${S.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (res.status === 401) {
    $('token-form').hidden = false;
    $('token').focus();
  }
  if (!res.ok) throw new ApiFailure(res.status, data);
  return data;
}

function status(text, kind = '') {
  const el = $('status');
  el.textContent = text;
  el.className = `status ${kind}`;
}

// --------------------------------------------------------------------------- configurations

async function routeView(name) {
  if (!S.views.has(name)) S.views.set(name, await api('GET', `playground/routes/${encodeURIComponent(name)}`));
  return S.views.get(name);
}

function freshConfig(route, view) {
  const values = {};
  const enabled = {};
  for (const st of view.stages) {
    values[st.id] = Object.fromEntries(st.params.map((p) => [p.name, p.text]));
    enabled[st.id] = st.enabled;
  }
  for (const b of view.blocks) enabled[b.id] = b.enabled;
  return { route, view, values, enabled, check: null };
}

function cloneConfig(cfg) {
  return { ...cfg, values: structuredClone(cfg.values), enabled: { ...cfg.enabled }, check: null };
}

function baseEnabled(view, id) {
  const st = view.stages.find((s) => s.id === id);
  if (st) return st.enabled;
  return view.blocks.find((b) => b.id === id)?.enabled;
}

// The configuration in the CLI's form: {route, set, disable, enable}.
function overrides(cfg) {
  const out = { route: cfg.route, set: [], disable: [], enable: [] };
  for (const st of cfg.view.stages) {
    for (const p of st.params) {
      const text = cfg.values[st.id][p.name];
      if (text !== p.text) out.set.push(`${st.id}.${p.name}=${text}`);
    }
  }
  for (const [id, on] of Object.entries(cfg.enabled)) {
    if (on !== baseEnabled(cfg.view, id)) (on ? out.enable : out.disable).push(id);
  }
  return out;
}

function applyOverrides(cfg, config) {
  for (const item of config.set) {
    const eq = item.indexOf('=');
    const key = item.slice(0, eq);
    const dot = key.indexOf('.');
    const [sid, param] = [key.slice(0, dot), key.slice(dot + 1)];
    if (cfg.values[sid]) cfg.values[sid][param] = item.slice(eq + 1);
  }
  for (const id of config.disable) cfg.enabled[id] = false;
  for (const id of config.enable) cfg.enabled[id] = true;
}

const current = () => S.cfg[S.side];

function scheduleCheck(side) {
  clearTimeout(S.timers[side]);
  S.timers[side] = setTimeout(() => check(side), 250);
}

async function check(side) {
  const cfg = S.cfg[side];
  if (!cfg) return null;
  const sent = JSON.stringify(overrides(cfg));
  try {
    const res = await api('POST', 'playground/resolve', {
      config: JSON.parse(sent), question: $('question').value.trim() || null, group: S.group || null,
    });
    if (JSON.stringify(overrides(cfg)) !== sent) return null; // edited meanwhile: a newer check follows
    cfg.check = res;
    if (side === S.side) showCheck();
    return res;
  } catch (err) {
    status(err.message, 'error');
    return null;
  }
}

// --------------------------------------------------------------------------- stage list

function stageDiffersFromA(st) {
  if (!S.compare || S.side !== 'b' || !S.cfg.a || S.cfg.a.route !== S.cfg.b.route) return false;
  const a = S.cfg.a;
  const b = S.cfg.b;
  if (a.enabled[st.id] !== b.enabled[st.id]) return true;
  return st.params.some((p) => a.values[st.id][p.name] !== b.values[st.id][p.name]);
}

function paramField(cfg, st, p) {
  const id = `p-${S.side}-${slug(st.id)}-${slug(p.name)}`;
  const value = cfg.values[st.id][p.name];
  const describedBy = `${id}-help ${id}-error`;
  let input;
  const onChange = (text) => {
    cfg.values[st.id][p.name] = text;
    markStage(st);
    scheduleCheck(S.side);
  };
  if (p.widget === 'bool' && !p.nullable) {
    input = h('input', { type: 'checkbox', id, 'aria-describedby': describedBy, checked: value === 'true' });
    input.addEventListener('change', () => onChange(input.checked ? 'true' : 'false'));
  } else if (p.widget === 'choice') {
    const options = [...p.choices.map((c) => String(c)), ...(p.nullable ? ['null'] : [])];
    if (!options.includes(value)) options.push(value);
    input = h('select', { id, 'aria-describedby': describedBy },
      options.map((o) => h('option', { value: o, selected: o === value }, o)));
    input.addEventListener('change', () => onChange(input.value));
  } else if (p.widget === 'yaml') {
    input = h('textarea', { id, rows: 2, spellcheck: 'false', 'aria-describedby': describedBy });
    input.value = value;
    input.addEventListener('input', () => onChange(input.value));
  } else {
    const numeric = p.widget === 'integer' || p.widget === 'number';
    input = h('input', {
      type: 'text', id, value, spellcheck: 'false', autocomplete: 'off', 'aria-describedby': describedBy,
      inputmode: numeric ? (p.widget === 'integer' ? 'numeric' : 'decimal') : null,
    });
    input.addEventListener('input', () => onChange(input.value));
  }
  input.dataset.param = p.name;
  const range = [p.minimum !== null ? `min ${p.minimum}` : '', p.maximum !== null ? `max ${p.maximum}` : '']
    .filter(Boolean).join(', ');
  return h('div', { class: 'param', dataset: { param: p.name } },
    h('label', { for: id }, p.name),
    input,
    h('small', { id: `${id}-help`, class: 'help' },
      [p.description, range && ` (${range})`, p.nullable ? ' (null allowed)' : ''].join('')),
    h('p', { id: `${id}-error`, class: 'error param-error' }));
}

function stageItem(cfg, st) {
  const body = `body-${S.side}-${slug(st.id)}`;
  const sw = h('input', {
    type: 'checkbox', role: 'switch', class: 'switch', id: `sw-${S.side}-${slug(st.id)}`,
    'aria-label': `${st.id} on`, checked: cfg.enabled[st.id],
  });
  sw.addEventListener('change', () => {
    cfg.enabled[st.id] = sw.checked;
    markStage(st);
    scheduleCheck(S.side);
  });
  const toggle = h('button', { type: 'button', class: 'stage-toggle', 'aria-expanded': 'false', 'aria-controls': body },
    h('span', { class: 'sname' }, st.id),
    st.use !== st.id ? h('span', { class: 'suse' }, st.use) : null,
    h('span', { class: `kind k-${st.kind}` }, st.kind),
    h('span', { class: 'badge changed-badge' }, 'changed'),
    h('span', { class: 'badge differs-badge' }, '≠ A'));
  const panel = h('div', { class: 'stage-body', id: body, hidden: true },
    st.description ? h('p', { class: 'sdesc' }, st.description) : null,
    st.params.length ? st.params.map((p) => paramField(cfg, st, p)) : h('p', { class: 'hint' }, 'No parameters.'));
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    panel.hidden = !open;
  });
  return h('li', { class: 'stage', dataset: { stage: st.id } },
    h('div', { class: 'stage-row' }, sw, toggle),
    panel,
    h('p', { class: 'error stage-error' }));
}

function blockItem(cfg, block, items) {
  const sw = h('input', {
    type: 'checkbox', role: 'switch', class: 'switch', id: `sw-${S.side}-${slug(block.id)}`,
    'aria-label': `parallel block ${block.id} on`, checked: cfg.enabled[block.id],
  });
  sw.addEventListener('change', () => {
    cfg.enabled[block.id] = sw.checked;
    markBlock(block);
    scheduleCheck(S.side);
  });
  return h('li', { class: 'block', dataset: { stage: block.id } },
    h('div', { class: 'stage-row' }, sw,
      h('span', { class: 'block-name' }, `parallel ${block.id}`, h('span', { class: 'kind' }, `merge ${block.merge}`)),
      h('span', { class: 'badge changed-badge' }, 'changed')),
    h('p', { class: 'error stage-error' }),
    h('ol', { class: 'stages nested' }, items));
}

function renderStages() {
  const cfg = current();
  const list = clear($('stages'));
  if (!cfg) return;
  $('route-desc').textContent = cfg.view.description;
  const blocks = new Map(cfg.view.blocks.map((b) => [b.id, { block: b, items: [] }]));
  const seen = new Set();
  for (const st of cfg.view.stages) {
    const item = stageItem(cfg, st);
    if (st.block && blocks.has(st.block)) {
      const entry = blocks.get(st.block);
      entry.items.push(item);
      if (!seen.has(st.block)) {
        seen.add(st.block);
        list.append(entry.placeholder = h('li', { class: 'placeholder' }));
      }
    } else {
      list.append(item);
    }
  }
  for (const entry of blocks.values()) {
    if (entry.placeholder) entry.placeholder.replaceWith(blockItem(cfg, entry.block, entry.items));
  }
  for (const st of cfg.view.stages) markStage(st);
  for (const b of cfg.view.blocks) markBlock(b);
  showCheck();
}

function stageEl(id) {
  return [...$('stages').querySelectorAll('li[data-stage]')].find((li) => li.dataset.stage === id);
}

function markStage(st) {
  const cfg = current();
  const li = stageEl(st.id);
  if (!li || !cfg) return;
  const changed = cfg.enabled[st.id] !== st.enabled || st.params.some((p) => cfg.values[st.id][p.name] !== p.text);
  li.classList.toggle('off', !cfg.enabled[st.id]);
  li.classList.toggle('changed', changed);
  li.classList.toggle('differs', stageDiffersFromA(st));
}

function markBlock(block) {
  const cfg = current();
  const li = stageEl(block.id);
  if (!li || !cfg) return;
  li.classList.toggle('off', !cfg.enabled[block.id]);
  li.classList.toggle('changed', cfg.enabled[block.id] !== block.enabled);
}

function showCheck() {
  const cfg = current();
  const list = $('stages');
  for (const el of list.querySelectorAll('.error')) el.textContent = '';
  for (const el of list.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  const general = clear($('config-errors'));
  const res = cfg?.check;
  if (!res || res.ok) return;
  for (const err of res.errors) {
    const li = err.stage ? stageEl(err.stage) : null;
    let target = null;
    if (li && err.param) {
      const field = [...li.querySelectorAll('.param')].find((d) => d.dataset.param === err.param);
      if (field) {
        target = field.querySelector('.param-error');
        field.querySelector('[data-param]')?.setAttribute('aria-invalid', 'true');
        const body = li.querySelector('.stage-body');
        if (body?.hidden) li.querySelector('.stage-toggle')?.click();
      }
    }
    if (!target && li) target = li.querySelector(':scope > .stage-error');
    if (target) target.textContent = err.message;
    else general.append(h('p', { class: 'error' }, err.message));
  }
}

// --------------------------------------------------------------------------- pickers

function fillRoutes() {
  const select = $('route');
  const cfg = current();
  clear(select).append(...S.routes.map((r) => h('option', { value: r.name, selected: cfg && r.name === cfg.route }, r.name)));
  select.disabled = false;
  $('route-label').textContent = S.compare ? `Route of ${S.side.toUpperCase()}` : 'Route';
}

async function setRoute(side, name) {
  status(`Loading ${name}…`);
  let view;
  try {
    view = await routeView(name);
  } catch (e) {
    status(e.message, 'error'); // e.g. a route file on $GRAPHROUTE_ROUTES that does not load
    if (side === S.side) fillRoutes(); // the picker shows the route still being edited
    return;
  }
  S.cfg[side] = freshConfig(name, view);
  status('');
  if (side === S.side) {
    fillRoutes();
    renderStages();
  }
  scheduleCheck(side);
}

function setSide(side) {
  S.side = side;
  for (const b of document.querySelectorAll('.side')) b.setAttribute('aria-pressed', String(b.dataset.side === side));
  fillRoutes();
  renderStages();
  hideExport();
}

function setCompare(on) {
  S.compare = on;
  document.querySelector('.sides').hidden = !on;
  $('run-ab').hidden = !on;
  if (on && !S.cfg.b) S.cfg.b = cloneConfig(S.cfg.a);
  if (on) scheduleCheck('b');
  setSide(on ? S.side : 'a');
}

// --------------------------------------------------------------------------- export / import

function hideExport() {
  $('export').hidden = true;
}

async function exportAs(kind) {
  const res = await check(S.side);
  if (!res) return;
  if (!res.ok) {
    status('Fix the configuration first: ' + res.errors[0].message, 'error');
    return;
  }
  const text = kind === 'yaml' ? res.yaml : res.command;
  const area = $('export-text');
  $('export-label').textContent = kind === 'yaml' ? 'Route file (YAML)' : 'Command';
  area.value = text;
  area.dataset.kind = kind;
  $('export').hidden = false;
  area.focus();
  area.select();
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    copied = false;
  }
  status(copied ? `Copied the ${kind === 'yaml' ? 'route file' : 'command'} to the clipboard.`
    : 'The text is selected below: copy it with Ctrl+C.', 'ok');
}

async function importYaml(event) {
  event.preventDefault();
  const err = $('import-error');
  err.textContent = '';
  try {
    const res = await api('POST', 'playground/import', { yaml: $('import-text').value });
    const view = await routeView(res.config.route);
    const cfg = freshConfig(res.config.route, view);
    applyOverrides(cfg, res.config);
    S.cfg[S.side] = cfg;
    fillRoutes();
    renderStages();
    await check(S.side);
    status(`Loaded ${res.name} (extends ${res.config.route}) into ${S.side.toUpperCase()}.`, 'ok');
  } catch (e) {
    err.textContent = e.message;
  }
}

// --------------------------------------------------------------------------- running

async function withBusy(label, fn) {
  if (S.busy) return;
  S.busy = true;
  for (const id of ['ask', 'run-ab', 'qset-run']) $(id).disabled = true;
  status(label);
  const t0 = performance.now();
  try {
    await fn();
    status(`Done in ${((performance.now() - t0) / 1000).toFixed(2)} s.`, 'ok');
  } catch (e) {
    status(e.message, 'error');
  } finally {
    S.busy = false;
    for (const id of ['ask', 'run-ab', 'qset-run']) $(id).disabled = false;
  }
}

function label(side) {
  const cfg = S.cfg[side];
  const ov = overrides(cfg);
  const n = ov.set.length + ov.disable.length + ov.enable.length;
  return `${side.toUpperCase()} · ${cfg.route}${n ? ` (${n} change${n > 1 ? 's' : ''})` : ''}`;
}

async function ask(event) {
  event?.preventDefault();
  const question = $('question').value.trim();
  if (!question) return;
  const side = S.side;
  await withBusy(`Asking ${side.toUpperCase()}…`, async () => {
    const res = await api('POST', 'playground/query', { question, group: S.group || null, config: overrides(S.cfg[side]) });
    clear($('results')).append(renderRun(res, { title: label(side), side }));
  });
}

async function runAB() {
  const question = $('question').value.trim();
  if (!question) {
    $('question').focus();
    status('Type a question first.', 'error');
    return;
  }
  await withBusy('Running A and B…', async () => {
    const res = await api('POST', 'playground/ab', {
      question, group: S.group || null, a: overrides(S.cfg.a), b: overrides(S.cfg.b),
    });
    clear($('results')).append(renderAB(res, { a: label('a'), b: label('b') }));
  });
}

function parseQuestions(text) {
  const out = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      out.push(JSON.parse(line));
    } catch (e) {
      throw new Error(`line ${i + 1}: not JSON (${e.message})`);
    }
  });
  return out;
}

async function runQuestionSet() {
  const out = $('qset-out');
  await withBusy('Scoring A and B on the question set…', async () => {
    const questions = parseQuestions($('qset-text').value);
    if (!questions.length) throw new Error('Add at least one question (one JSON object a line).');
    const b = S.cfg.b || S.cfg.a;
    const res = await api('POST', 'playground/ab/questions', {
      group: S.group || null, a: overrides(S.cfg.a), b: overrides(b), questions,
    });
    clear(out).append(renderQuestionSet(res));
  });
}

// --------------------------------------------------------------------------- start

async function start() {
  try {
    S.info = await api('GET', 'playground/info');
  } catch (e) {
    status(e.status === 401 ? 'This server needs a bearer token.' : e.message, 'error');
    return;
  }
  $('token-form').hidden = true;
  S.routes = await api('GET', 'routes');
  const groups = S.info.groups.length ? S.info.groups : [S.info.group];
  S.group = groups.includes(S.info.group) ? S.info.group : groups[0];
  const gsel = clear($('group'));
  gsel.append(...groups.map((g) => h('option', { value: g, selected: g === S.group }, g)));
  gsel.disabled = false;
  const names = S.routes.map((r) => r.name);
  const route = names.includes(S.info.route) ? S.info.route : names[0];
  await setRoute('a', route);
  if (!S.info.groups.length) status(`The store has no groups yet: index documents first (POST /index).`, 'error');
}

function wire() {
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    S.token = $('token').value.trim();
    sessionStorage.setItem(TOKEN_KEY, S.token);
    start();
  });
  $('group').addEventListener('change', (e) => { S.group = e.target.value; });
  $('route').addEventListener('change', (e) => setRoute(S.side, e.target.value));
  $('compare').addEventListener('change', (e) => setCompare(e.target.checked));
  for (const b of document.querySelectorAll('.side')) b.addEventListener('click', () => setSide(b.dataset.side));
  $('copy-yaml').addEventListener('click', () => exportAs('yaml'));
  $('copy-command').addEventListener('click', () => exportAs('command'));
  $('reset').addEventListener('click', () => {
    const cfg = current();
    S.cfg[S.side] = freshConfig(cfg.route, cfg.view);
    renderStages();
    scheduleCheck(S.side);
    hideExport();
  });
  $('open-import').addEventListener('click', () => {
    const form = $('import');
    form.hidden = !form.hidden;
    $('open-import').setAttribute('aria-expanded', String(!form.hidden));
    if (!form.hidden) $('import-text').focus();
  });
  $('import').addEventListener('submit', importYaml);
  $('ask-form').addEventListener('submit', ask);
  $('run-ab').addEventListener('click', runAB);
  $('qset-run').addEventListener('click', runQuestionSet);
}

wire();
start();
