// The graph neighbourhood a route used, drawn as SVG: seeds, ranked entities (PPR) and the
// chosen passages, with the edges between them. The layout is a small deterministic
// force-directed one (Fruchterman-Reingold, a fixed number of steps from fixed starting
// points), so the same answer always draws the same picture and no library is needed for
// the few dozen nodes a run shows.
import { h, svg, clear, fmt, truncate } from './dom.js';

const W = 560;
const H = 340;
const STEPS = 240;
const GRAVITY = 3;

const ROLE_TEXT = { seed: 'seed', ranked: 'ranked entity (PPR)', passage: 'chosen passage' };

function layout(nodes, edges) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  // start: passages on an outer ring, entities on an inner one, in the order given
  const pos = nodes.map((node, i) => {
    const outer = node.roles.includes('passage');
    const angle = (2 * Math.PI * i) / Math.max(n, 1);
    const r = outer ? 0.42 : 0.22;
    return { x: 0.5 + r * Math.cos(angle), y: 0.5 + r * Math.sin(angle) };
  });
  const links = edges
    .map((e) => [index.get(e.src), index.get(e.dst)])
    .filter(([a, b]) => a !== undefined && b !== undefined);
  const k = Math.sqrt(1 / Math.max(n, 1)) * 0.7;
  let temp = 0.1;
  for (let step = 0; step < STEPS; step++) {
    const disp = pos.map(() => ({ x: 0, y: 0 }));
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const dx = pos[i].x - pos[j].x || 1e-6 * (i - j);
        const dy = pos[i].y - pos[j].y || 1e-6;
        const d2 = Math.max(dx * dx + dy * dy, 1e-6);
        const f = (k * k) / d2;
        disp[i].x += dx * f; disp[i].y += dy * f;
        disp[j].x -= dx * f; disp[j].y -= dy * f;
      }
    }
    for (const [a, b] of links) {
      const dx = pos[a].x - pos[b].x;
      const dy = pos[a].y - pos[b].y;
      const d = Math.max(Math.sqrt(dx * dx + dy * dy), 1e-6);
      const f = d / k;
      disp[a].x -= dx * f; disp[a].y -= dy * f;
      disp[b].x += dx * f; disp[b].y += dy * f;
    }
    for (let i = 0; i < n; i++) {
      // a pull to the centre keeps unconnected nodes near the rest instead of in a corner
      disp[i].x += (0.5 - pos[i].x) * GRAVITY;
      disp[i].y += (0.5 - pos[i].y) * GRAVITY;
      const len = Math.max(Math.hypot(disp[i].x, disp[i].y), 1e-9);
      const move = Math.min(len, temp);
      pos[i].x += (disp[i].x / len) * move;
      pos[i].y += (disp[i].y / len) * move;
    }
    temp = Math.max(temp * 0.985, 0.002);
  }
  // fit into the canvas with a margin for labels
  const xs = pos.map((p) => p.x);
  const ys = pos.map((p) => p.y);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const sx = (W - 140) / Math.max(x1 - x0, 1e-6);
  const sy = (H - 50) / Math.max(y1 - y0, 1e-6);
  return pos.map((p) => ({
    x: n === 1 ? W / 2 : 70 + (p.x - x0) * sx,
    y: n === 1 ? H / 2 : 25 + (p.y - y0) * sy,
  }));
}

function radius(node) {
  if (node.roles.includes('passage')) return 7;
  if (!node.roles.includes('ranked')) return 6;
  return 5 + Math.min(8, Math.sqrt(Math.max(node.score ?? 0, 0)) * 25);
}

function describe(node) {
  const roles = node.roles.map((r) => ROLE_TEXT[r]).join(', ');
  const bits = [`${node.name} (${node.label}): ${roles}`];
  if (node.weight !== null && node.weight !== undefined) bits.push(`seed weight ${fmt(node.weight)}`);
  if (node.score !== null && node.score !== undefined) bits.push(`score ${fmt(node.score)}`);
  return bits.join('; ');
}

export function renderGraph(graph, label) {
  const wrap = h('div', { class: 'graph' });
  const nodes = graph.nodes || [];
  const edges = graph.edges || [];
  if (!nodes.length) {
    wrap.append(h('p', { class: 'hint' }, 'This run used no graph nodes (no seeds, ranked entities or passages).'));
    return wrap;
  }
  const pos = layout(nodes, edges);
  const at = new Map(nodes.map((node, i) => [node.id, pos[i]]));
  const info = h('p', { class: 'graph-info', 'aria-live': 'polite' }, 'Focus or point at a node to see what it is.');
  const picture = svg('svg', {
    viewBox: `0 0 ${W} ${H}`, class: 'graph-svg', role: 'group',
    'aria-label': `${label}: ${nodes.length} nodes, ${edges.length} edges. Tab through the nodes.`,
  });
  const edgeEls = edges.map((e) => {
    const a = at.get(e.src);
    const b = at.get(e.dst);
    const line = svg('line', {
      x1: a.x.toFixed(1), y1: a.y.toFixed(1), x2: b.x.toFixed(1), y2: b.y.toFixed(1),
      class: `edge e-${e.type.toLowerCase()}`,
    });
    line.dataset.src = e.src;
    line.dataset.dst = e.dst;
    picture.append(line);
    return line;
  });
  nodes.forEach((node, i) => {
    const p = pos[i];
    const r = radius(node);
    const roles = node.roles.map((role) => `r-${role}`);
    const g = svg('g', {
      class: ['node', ...roles], tabindex: '0', role: 'img', 'aria-label': describe(node),
      transform: `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`,
    });
    if (node.roles.includes('passage')) {
      g.append(svg('rect', { x: -r, y: -r, width: 2 * r, height: 2 * r, rx: 2, class: 'shape' }));
    } else {
      if (node.roles.includes('seed')) g.append(svg('circle', { r: (r + 3).toFixed(1), class: 'seed-ring' }));
      g.append(svg('circle', { r: r.toFixed(1), class: 'shape' }));
    }
    g.append(svg('text', { x: r + 4, y: 4 }, truncate(node.name, 22)));
    const focus = (on) => {
      g.classList.toggle('active', on);
      for (const line of edgeEls) {
        line.classList.toggle('active', on && (line.dataset.src === node.id || line.dataset.dst === node.id));
      }
      if (on) info.textContent = describe(node) + (node.text ? ` — “${truncate(node.text, 160)}”` : '');
    };
    g.addEventListener('focus', () => focus(true));
    g.addEventListener('blur', () => focus(false));
    g.addEventListener('mouseenter', () => focus(true));
    g.addEventListener('mouseleave', () => focus(false));
    picture.append(g);
  });
  const legend = h('ul', { class: 'legend', 'aria-label': 'Legend' },
    h('li', { class: 'l-seed' }, 'seed'),
    h('li', { class: 'l-ranked' }, 'ranked entity (PPR)'),
    h('li', { class: 'l-seed-ring' }, 'ranked seed'),
    h('li', { class: 'l-passage' }, 'chosen passage'),
    h('li', { class: 'l-mentions' }, 'mentions'),
    h('li', { class: 'l-entity' }, 'entity edge'));
  const list = h('details', { class: 'graph-list' },
    h('summary', {}, 'Nodes and edges as text'),
    h('ul', {}, nodes.map((node) => h('li', {}, describe(node)))),
    h('ul', {}, edges.map((e) => {
      const name = (id) => nodes.find((node) => node.id === id)?.name ?? id;
      return h('li', {}, `${name(e.src)} —${e.type}→ ${name(e.dst)}`);
    })));
  clear(wrap).append(picture, info, legend, list);
  return wrap;
}
