// Rendering of results: one run (answer, citations, evidence, trace timeline, graph), an
// A/B pair with what B changed, and the scored comparison of a question set.
import { h, fmt, truncate } from './dom.js';
import { renderGraph } from './graph.js';

function where(doc, section, page) {
  let text = section && section !== doc ? (section.startsWith(doc) ? section : `${doc} › ${section}`) : doc;
  text = text.replaceAll(' > ', ' › ');
  if (page !== null && page !== undefined) text += ` · p. ${page}`;
  return text || '(untitled)';
}

function statsSummary(stats) {
  const bits = [];
  for (const [key, value] of Object.entries(stats || {})) {
    if (value === null || typeof value === 'object') continue;
    bits.push(`${key} ${fmt(value, 3)}`);
    if (bits.length === 3) break;
  }
  return bits.join(' · ');
}

function stageNote(row) {
  if (!row) return '';
  const bits = [];
  if (row.changes.includes('stage')) bits.push(row.in_a ? 'only in A' : 'only in B');
  if (row.changes.includes('enabled')) bits.push('switched');
  for (const [p, [a, b]] of Object.entries(row.params || {})) bits.push(`${p} ${fmt(a)} → ${fmt(b)}`);
  if (row.stats?.length) bits.push(`stats differ: ${row.stats.slice(0, 4).join(', ')}`);
  return bits.join('; ');
}

export function renderTimeline(trace, diffRows, side) {
  const total = trace.reduce((sum, t) => sum + (t.enabled ? t.duration_ms : 0), 0) || 1;
  let start = 0;
  const rows = trace.map((t) => {
    const row = diffRows?.get(t.stage);
    const differs = row && row.changes.length > 0;
    const left = (start / total) * 100;
    const width = t.enabled ? Math.max((t.duration_ms / total) * 100, 0.6) : 0;
    if (t.enabled) start += t.duration_ms;
    const note = differs ? stageNote(row) : '';
    const changedCounts = differs && (row.changes.includes('items_in') || row.changes.includes('items_out'));
    return h('tr', { class: ['stage-trace', !t.enabled && 'off', differs && 'differs'], dataset: { stage: t.stage } },
      h('th', { scope: 'row' },
        h('span', { class: 'tname' }, t.stage),
        h('span', { class: `kind k-${t.kind}` }, t.kind),
        note ? h('span', { class: 'diff-note' }, note) : null),
      h('td', { class: 'bar-cell' },
        t.enabled
          ? h('span', { class: 'bar', style: null, dataset: { left: left.toFixed(2), width: width.toFixed(2) } })
          : h('span', { class: 'off-label' }, 'off')),
      h('td', { class: 'num' }, t.enabled ? `${fmt(t.duration_ms, 1)} ms` : '–'),
      h('td', { class: ['num', changedCounts && 'changed'] }, t.enabled ? `${t.items_in} → ${t.items_out}` : '–'),
      h('td', { class: 'stats' },
        Object.keys(t.stats || {}).length
          ? h('details', {},
            h('summary', {}, statsSummary(t.stats) || 'stats'),
            h('pre', {}, JSON.stringify({ ...t.stats, ...(Object.keys(t.tokens || {}).length ? { tokens: t.tokens } : {}) }, null, 1)))
          : ''));
  });
  const table = h('table', { class: 'timeline', 'aria-label': `Trace ${side || ''}`.trim() },
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'stage'), h('th', { scope: 'col' }, 'timeline'),
      h('th', { scope: 'col' }, 'time'), h('th', { scope: 'col' }, 'in → out'), h('th', { scope: 'col' }, 'stats'))),
    h('tbody', {}, rows));
  // bars are placed by CSS custom properties (the page's CSP allows no inline styles)
  for (const bar of table.querySelectorAll('.bar')) {
    bar.style.setProperty('--left', `${bar.dataset.left}%`);
    bar.style.setProperty('--width', `${bar.dataset.width}%`);
  }
  return table;
}

function evidenceItem(e, rank, mark) {
  return h('li', { class: ['evidence-item', mark], dataset: { id: e.id } },
    h('div', { class: 'ev-head' },
      h('span', { class: 'rank' }, `#${rank}`),
      h('span', { class: 'where' }, where(e.document, e.section_path, e.page)),
      mark ? h('span', { class: `mark m-${mark}` }, mark === 'entered' ? 'entered in B' : 'left in B') : null,
      h('span', { class: 'meta' }, `${e.kind} · ${e.source} · ${fmt(e.score, 4)}`)),
    h('p', { class: 'ev-text' }, truncate(e.text, 420)));
}

export function renderRun(run, { title, side, diff } = {}) {
  const r = run.result;
  const marks = new Map();
  if (diff && side === 'a') for (const e of diff.left) marks.set(e.id, 'left');
  if (diff && side === 'b') for (const e of diff.entered) marks.set(e.id, 'entered');
  const diffRows = diff ? new Map(diff.stages.map((row) => [row.stage, row])) : null;
  return h('article', { class: 'run-card', 'aria-label': title, dataset: { side: side || 'a' } },
    h('h3', {}, title, h('span', { class: 'took' }, ` · ${fmt(r.duration_ms, 1)} ms`)),
    h('section', { class: ['answer', r.negative && 'negative', diff?.answer_changed && 'changed'] },
      h('h4', {}, 'Answer'), h('p', { class: 'answer-text' }, r.answer)),
    h('section', {},
      h('h4', {}, `Citations (${r.citations.length})`),
      r.citations.length
        ? h('ol', { class: 'citations' }, r.citations.map((c) => h('li', { value: c.index },
          h('span', { class: 'where' }, where(c.document, c.section_path, c.page)),
          c.text ? h('span', { class: 'cite-text' }, ` — ${truncate(c.text, 160)}`) : null)))
        : h('p', { class: 'hint' }, 'No citations.')),
    h('section', {},
      h('h4', {}, `Evidence (${r.evidence.length})`),
      h('ol', { class: 'evidence' }, r.evidence.map((e, i) => evidenceItem(e, i + 1, marks.get(e.id))))),
    h('section', {}, h('h4', {}, 'Trace'), renderTimeline(r.trace, diffRows, side)),
    h('section', {}, h('h4', {}, 'Graph neighbourhood'), renderGraph(run.graph, `Graph of ${title}`)));
}

export function renderAB(ab, labels) {
  const d = ab.diff;
  const differing = d.stages.filter((row) => row.changes.length);
  const summary = h('section', { class: 'ab-summary', 'aria-label': 'What B changed' },
    h('h3', {}, 'What B changed'),
    h('ul', {},
      h('li', {}, d.answer_changed ? 'The answer changed.' : 'The answer is the same.'),
      h('li', {}, `Evidence: ${d.entered.length} entered, ${d.left.length} left, ${d.moved.length} moved.`),
      h('li', {}, differing.length
        ? [`Stages that differ (${differing.length}): `,
          differing.map((row, i) => [i ? ', ' : '', h('code', {}, row.stage), ` (${row.changes.join(', ')})`])]
        : 'No stage differs.')),
    d.entered.length || d.left.length
      ? h('div', { class: 'moves' },
        d.entered.length ? h('div', {}, h('h4', {}, 'Entered'), h('ul', { class: 'move-list' },
          d.entered.map((e) => h('li', { class: 'entered' }, `#${e.rank_b} ${where(e.document, e.section_path)}: ${truncate(e.text, 120)}`)))) : null,
        d.left.length ? h('div', {}, h('h4', {}, 'Left'), h('ul', { class: 'move-list' },
          d.left.map((e) => h('li', { class: 'left' }, `#${e.rank_a} ${where(e.document, e.section_path)}: ${truncate(e.text, 120)}`)))) : null)
      : null);
  return h('div', { class: 'ab' }, summary,
    h('div', { class: 'ab-grid' },
      renderRun(ab.a, { title: labels.a, side: 'a', diff: d }),
      renderRun(ab.b, { title: labels.b, side: 'b', diff: d })));
}

const SET_METRICS = ['recall@2', 'recall@5', 'recall@10', 'signal_rank', 'containment', 'em', 'f1',
  'negative_pass', 'false_negative', 'context_tokens_mean', 'chunks_mean', 'latency_ms_p50'];

export function renderQuestionSet(res) {
  const cmp = res.comparison;
  const better = res.higher_is_better;
  const rows = SET_METRICS.filter((m) => m in cmp.deltas).map((m) => {
    const delta = cmp.deltas[m];
    let cls = null;
    if (delta && better[m] !== undefined) cls = (delta > 0) === better[m] ? 'better' : 'worse';
    return h('tr', {},
      h('th', { scope: 'row' }, m),
      h('td', { class: 'num' }, fmt(cmp.a.metrics[m])),
      h('td', { class: 'num' }, fmt(cmp.b.metrics[m])),
      h('td', { class: ['num', cls] }, delta === null || delta === undefined ? '–' : (delta > 0 ? '+' : '') + fmt(delta)));
  });
  const perQ = res.a.map((qa, i) => {
    const qb = res.b[i];
    return h('tr', {},
      h('th', { scope: 'row' }, truncate(qa.question, 70)),
      h('td', { class: 'num' }, fmt(qa.f1, 3)), h('td', { class: 'num' }, fmt(qb.f1, 3)),
      h('td', { class: 'num' }, fmt(qa['recall@5'], 3)), h('td', { class: 'num' }, fmt(qb['recall@5'], 3)));
  });
  return h('div', { class: 'qset-result' },
    h('p', { class: ['verdict', cmp.verdict === 'KEEP' ? 'better' : 'worse'] },
      h('strong', {}, `Verdict: ${cmp.verdict}`), ` (${cmp.reasons.join('; ') || '–'})`),
    h('table', { class: 'metrics', 'aria-label': 'Metrics of A and B' },
      h('thead', {}, h('tr', {}, ['metric', cmp.a.label, cmp.b.label, 'B − A'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows)),
    h('ul', { class: 'wlt' }, Object.entries(cmp.per_question).map(([m, w]) =>
      h('li', {}, `${m}: B wins ${w.wins}, losses ${w.losses}, ties ${w.ties}`))),
    res.unresolved_gold.length
      ? h('p', { class: 'error' }, `Gold references that name no document of the group: ${res.unresolved_gold.join(', ')}`)
      : null,
    h('table', { class: 'metrics per-question', 'aria-label': 'Per question' },
      h('thead', {}, h('tr', {}, ['question', 'f1 A', 'f1 B', 'recall@5 A', 'recall@5 B'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, perQ)),
    h('p', { class: 'hint' }, cmp.rule));
}
